/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <acl/libacl.h>
#include <sys/acl.h>
#include <sys/xattr.h>

#include "common/acl.h"
#include "common/util.h"

/* The kernel's name of a directory's default ACL (what acl_get_file(ACL_TYPE_DEFAULT)
 * reads); asked for directly so an fd can be used. */
#define DEFAULT_ACL_XATTR "system.posix_acl_default"

static void acl_cleanup(acl_t *a)
{
	if (*a)
		acl_free(*a);
}
#define cleanup_acl __attribute__((cleanup(acl_cleanup)))

static int add_entry(acl_t *acl, acl_tag_t tag, const uid_t *id, unsigned perms)
{
	acl_entry_t e;
	acl_permset_t ps;
	if (acl_create_entry(acl, &e) < 0 || acl_set_tag_type(e, tag) < 0 || (id && acl_set_qualifier(e, id) < 0) ||
	    acl_get_permset(e, &ps) < 0 || acl_clear_perms(ps) < 0)
		return -errno;
	if (((perms & RTS_PERM_R) && acl_add_perm(ps, ACL_READ) < 0) ||
	    ((perms & RTS_PERM_W) && acl_add_perm(ps, ACL_WRITE) < 0) ||
	    ((perms & RTS_PERM_X) && acl_add_perm(ps, ACL_EXECUTE) < 0) || acl_set_permset(e, ps) < 0)
		return -errno;
	return 0;
}

int rts_acl_grant(int fd, const char *path, unsigned owner_perms, uid_t uid, unsigned perms)
{
	/* Built entry by entry with numeric ids: acl_from_text() would look names up (NSS),
	 * which the daemons' filters do not allow once they serve. */
	cleanup_acl acl_t acl = acl_init(5);
	if (!acl)
		return -errno;
	int r;
	if ((r = add_entry(&acl, ACL_USER_OBJ, NULL, owner_perms)) < 0 || (r = add_entry(&acl, ACL_USER, &uid, perms)) < 0 ||
	    (r = add_entry(&acl, ACL_GROUP_OBJ, NULL, 0)) < 0 || (r = add_entry(&acl, ACL_MASK, NULL, perms)) < 0 ||
	    (r = add_entry(&acl, ACL_OTHER, NULL, 0)) < 0)
		return r;
	if (acl_valid(acl) < 0)
		return -EINVAL;
	if ((fd >= 0 ? acl_set_fd(fd, acl) : acl_set_file(path, ACL_TYPE_ACCESS, acl)) < 0)
		return errno == ENOTSUP ? -EOPNOTSUPP : -errno;
	return 0;
}

int rts_acl_drop_default(const char *path)
{
	if (removexattr(path, DEFAULT_ACL_XATTR) < 0 && errno != ENODATA)
		return errno == ENOTSUP ? 0 : -errno;
	return 0;
}

/* Call fn(tag, perms, entry, arg) for every entry of acl, until it returns non-zero.
 * Returns 0, fn's value, or -errno. */
static int each_entry(acl_t acl, int (*fn)(acl_tag_t tag, unsigned perms, acl_entry_t e, void *arg), void *arg);

static unsigned perms_of(acl_entry_t e)
{
	acl_permset_t ps;
	if (acl_get_permset(e, &ps) < 0)
		return 0;
	return (acl_get_perm(ps, ACL_READ) == 1 ? RTS_PERM_R : 0) | (acl_get_perm(ps, ACL_WRITE) == 1 ? RTS_PERM_W : 0) |
	       (acl_get_perm(ps, ACL_EXECUTE) == 1 ? RTS_PERM_X : 0);
}

static int each_entry(acl_t acl, int (*fn)(acl_tag_t tag, unsigned perms, acl_entry_t e, void *arg), void *arg)
{
	acl_entry_t e;
	for (int w = ACL_FIRST_ENTRY;; w = ACL_NEXT_ENTRY) {
		int got = acl_get_entry(acl, w, &e);
		if (got < 0)
			return -errno;
		if (got == 0)
			return 0;
		acl_tag_t tag;
		if (acl_get_tag_type(e, &tag) < 0)
			return -errno;
		int r = fn(tag, perms_of(e), e, arg);
		if (r != 0)
			return r;
	}
}

/* The qualifier (uid or gid) of a named entry. Returns 0 or -errno. */
static int qualifier(acl_entry_t e, id_t *id)
{
	id_t *q = acl_get_qualifier(e);
	if (!q)
		return -errno;
	*id = *q;
	acl_free(q);
	return 0;
}

struct view_walk {
	struct rts_acl_view *v;
	bool has_mask;
};

static int view_entry(acl_tag_t tag, unsigned p, acl_entry_t e, void *arg)
{
	struct view_walk *w = arg;
	struct rts_acl_view *v = w->v;
	switch (tag) {
	case ACL_USER_OBJ:
		v->owner_perms = p;
		return 0;
	case ACL_GROUP_OBJ:
		v->group_perms = p;
		return 0;
	case ACL_OTHER:
		v->other_perms = p;
		return 0;
	case ACL_MASK:
		v->mask = p;
		w->has_mask = true;
		return 0;
	case ACL_USER:
		if (v->named_users++ == 0) {
			id_t id = 0;
			int r = qualifier(e, &id);
			if (r < 0)
				return r;
			v->user = (uid_t)id;
			v->user_perms = p;
		}
		return 0;
	case ACL_GROUP:
		v->named_groups++;
		return 0;
	default:
		return -EINVAL;
	}
}

int rts_acl_view(int fd, const char *path, struct rts_acl_view *v)
{
	*v = (struct rts_acl_view){0};
	/* libacl builds a three-entry ACL from the mode on a file system without ACLs. */
	cleanup_acl acl_t acl = fd >= 0 ? acl_get_fd(fd) : acl_get_file(path, ACL_TYPE_ACCESS);
	if (!acl)
		return -errno;
	struct view_walk w = {.v = v};
	int r = each_entry(acl, view_entry, &w);
	if (r < 0)
		return r;
	v->extended = w.has_mask || v->named_users || v->named_groups;
	if (!w.has_mask)
		v->mask = v->group_perms;
	ssize_t n = fd >= 0 ? fgetxattr(fd, DEFAULT_ACL_XATTR, NULL, 0) : getxattr(path, DEFAULT_ACL_XATTR, NULL, 0);
	if (n < 0 && errno != ENODATA && errno != ENOTSUP)
		return -errno;
	v->has_default = n > 0;
	return 0;
}

struct perms_walk {
	const struct stat *st;
	uid_t uid;
	gid_t gid;
	unsigned mask, user, group, other;
	bool named_user, in_group;
};

static int perms_entry(acl_tag_t tag, unsigned p, acl_entry_t e, void *arg)
{
	struct perms_walk *w = arg;
	id_t id = 0;
	int r;
	switch (tag) {
	case ACL_MASK:
		w->mask = p;
		return 0;
	case ACL_OTHER:
		w->other = p;
		return 0;
	case ACL_GROUP_OBJ:
		if (w->st->st_gid == w->gid)
			w->group |= p, w->in_group = true;
		return 0;
	case ACL_USER:
		if ((r = qualifier(e, &id)) < 0)
			return r;
		if ((uid_t)id == w->uid)
			w->user = p, w->named_user = true;
		return 0;
	case ACL_GROUP:
		if ((r = qualifier(e, &id)) < 0)
			return r;
		if ((gid_t)id == w->gid)
			w->group |= p, w->in_group = true;
		return 0;
	default:
		return 0;
	}
}

int rts_acl_perms_for(int fd, const char *path, const struct stat *st, uid_t uid, gid_t gid)
{
	if (uid == st->st_uid)
		return (int)((st->st_mode >> 6) & 07);
	cleanup_acl acl_t acl = fd >= 0 ? acl_get_fd(fd) : acl_get_file(path, ACL_TYPE_ACCESS);
	if (!acl)
		return -errno;
	struct perms_walk w = {.st = st, .uid = uid, .gid = gid, .mask = 07};
	int r = each_entry(acl, perms_entry, &w);
	if (r < 0)
		return r;
	if (w.named_user)
		return (int)(w.user & w.mask);
	if (w.in_group)
		return (int)(w.group & w.mask);
	return (int)w.other;
}

bool rts_acl_private_but(const struct rts_acl_view *v, uid_t uid, unsigned perms)
{
	if (v->group_perms || v->other_perms || v->named_groups || v->has_default)
		return false;
	if (v->named_users == 0)
		return true;
	/* Another account's entry counts even when the mask hides it today: a chmod g+x
	 * (systemd's StateDirectoryMode= for one) would bring it to life. */
	return v->named_users == 1 && uid != (uid_t)-1 && v->user == uid && (v->user_perms & ~perms) == 0;
}

bool rts_acl_is_grant(const struct rts_acl_view *v, unsigned owner_perms, uid_t uid, unsigned perms)
{
	return v->extended && v->owner_perms == owner_perms && v->named_users == 1 && v->user == uid &&
	       v->user_perms == perms && v->mask == perms && v->group_perms == 0 && v->other_perms == 0 &&
	       v->named_groups == 0 && !v->has_default;
}

struct named_walk {
	bool (*accept)(const struct rts_acl_named *e, void *arg);
	void *arg;
	struct rts_acl_named *found;
};

static int named_entry(acl_tag_t tag, unsigned p, acl_entry_t e, void *arg)
{
	struct named_walk *w = arg;
	if ((tag != ACL_USER && tag != ACL_GROUP) || p == 0)
		return 0;
	struct rts_acl_named n = {.group = tag == ACL_GROUP, .perms = p};
	int r = qualifier(e, &n.id);
	if (r < 0)
		return r;
	if (w->accept(&n, w->arg))
		return 0;
	*w->found = n;
	return 1;
}

int rts_acl_find_named(int fd, const char *path, bool (*accept)(const struct rts_acl_named *e, void *arg), void *arg,
		       struct rts_acl_named *found)
{
	cleanup_acl acl_t acl = fd >= 0 ? acl_get_fd(fd) : acl_get_file(path, ACL_TYPE_ACCESS);
	if (!acl)
		return errno == ENOTSUP ? 0 : -errno;
	struct named_walk w = {.accept = accept, .arg = arg, .found = found};
	return each_entry(acl, named_entry, &w);
}
