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

static unsigned perms_of(acl_entry_t e)
{
	acl_permset_t ps;
	if (acl_get_permset(e, &ps) < 0)
		return 0;
	return (acl_get_perm(ps, ACL_READ) == 1 ? RTS_PERM_R : 0) | (acl_get_perm(ps, ACL_WRITE) == 1 ? RTS_PERM_W : 0) |
	       (acl_get_perm(ps, ACL_EXECUTE) == 1 ? RTS_PERM_X : 0);
}

int rts_acl_view(int fd, const char *path, struct rts_acl_view *v)
{
	*v = (struct rts_acl_view){0};
	/* libacl builds a three-entry ACL from the mode on a file system without ACLs. */
	cleanup_acl acl_t acl = fd >= 0 ? acl_get_fd(fd) : acl_get_file(path, ACL_TYPE_ACCESS);
	if (!acl)
		return -errno;
	bool has_mask = false;
	acl_entry_t e;
	for (int w = ACL_FIRST_ENTRY;; w = ACL_NEXT_ENTRY) {
		int got = acl_get_entry(acl, w, &e);
		if (got < 0)
			return -errno;
		if (got == 0)
			break;
		acl_tag_t tag;
		if (acl_get_tag_type(e, &tag) < 0)
			return -errno;
		unsigned p = perms_of(e);
		switch (tag) {
		case ACL_USER_OBJ:
			v->owner_perms = p;
			break;
		case ACL_GROUP_OBJ:
			v->group_perms = p;
			break;
		case ACL_OTHER:
			v->other_perms = p;
			break;
		case ACL_MASK:
			v->mask = p;
			has_mask = true;
			break;
		case ACL_USER:
			if (v->named_users++ == 0) {
				uid_t *id = acl_get_qualifier(e);
				if (!id)
					return -errno;
				v->user = *id;
				acl_free(id);
				v->user_perms = p;
			}
			break;
		case ACL_GROUP:
			v->named_groups++;
			break;
		default:
			return -EINVAL;
		}
	}
	v->extended = has_mask || v->named_users || v->named_groups;
	if (!has_mask)
		v->mask = v->group_perms;
	ssize_t n = fd >= 0 ? fgetxattr(fd, DEFAULT_ACL_XATTR, NULL, 0) : getxattr(path, DEFAULT_ACL_XATTR, NULL, 0);
	if (n < 0 && errno != ENODATA && errno != ENOTSUP)
		return -errno;
	v->has_default = n > 0;
	return 0;
}

int rts_acl_perms_for(int fd, const char *path, const struct stat *st, uid_t uid, gid_t gid)
{
	if (uid == st->st_uid)
		return (int)((st->st_mode >> 6) & 07);
	cleanup_acl acl_t acl = fd >= 0 ? acl_get_fd(fd) : acl_get_file(path, ACL_TYPE_ACCESS);
	if (!acl)
		return -errno;
	unsigned mask = 07, user = 0, group = 0, other = 0;
	bool named_user = false, in_group = false;
	acl_entry_t e;
	for (int w = ACL_FIRST_ENTRY;; w = ACL_NEXT_ENTRY) {
		int got = acl_get_entry(acl, w, &e);
		if (got < 0)
			return -errno;
		if (got == 0)
			break;
		acl_tag_t tag;
		if (acl_get_tag_type(e, &tag) < 0)
			return -errno;
		unsigned p = perms_of(e);
		if (tag == ACL_MASK) {
			mask = p;
		} else if (tag == ACL_OTHER) {
			other = p;
		} else if (tag == ACL_GROUP_OBJ && st->st_gid == gid) {
			group |= p;
			in_group = true;
		} else if (tag == ACL_USER || tag == ACL_GROUP) {
			id_t *id = acl_get_qualifier(e);
			if (!id)
				return -errno;
			bool match = tag == ACL_USER ? *id == uid : *id == gid;
			acl_free(id);
			if (match && tag == ACL_USER)
				user = p, named_user = true;
			else if (match)
				group |= p, in_group = true;
		}
	}
	if (named_user)
		return (int)(user & mask);
	if (in_group)
		return (int)(group & mask);
	return (int)other;
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
