/* SPDX-License-Identifier: Apache-2.0 */
/* POSIX ACLs (libacl) for the one kind of sharing the account model needs (DESIGN.md 8.1,
 * roundtable-sandbox(7) "Accounts"): a file or directory private to its owner, plus one
 * named account with fixed permissions. A channel's workspace gives the guest account
 * rwx, a turn's run dir gives it search and its broker socket read and write, runnerd.sock
 * and brokerd.sock give their one peer account read and write, workspaceRoot gives runnerd
 * search. An ACL entry names exactly one uid, where a group would also let in whoever else
 * is in it, and the owner can set it without being in any group (no chown, no setgid
 * directory that systemd's StateDirectory= or RuntimeDirectory= would reset).
 *
 * With an extended ACL the group bits of st_mode show the ACL's mask, not the owning
 * group: judge the ACL (rts_acl_view()), never those bits alone. */
#ifndef RTS_ACL_H
#define RTS_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Permission bits as in a mode's "other" triple. */
#define RTS_PERM_R 04u
#define RTS_PERM_W 02u
#define RTS_PERM_X 01u

/* Replace the access ACL of a file with: owner owner_perms, the named user uid perms,
 * owning group nothing, mask perms, others nothing (so st_mode's permission bits become
 * owner_perms, perms, 0; the setuid, setgid and sticky bits stay). The file is fd when
 * fd >= 0 (not an O_PATH fd), else path (symbolic links followed: pass a path nobody else
 * can change, or "/proc/self/fd/N" for an O_PATH fd). Returns 0 or -errno; -EOPNOTSUPP when
 * the file system has no POSIX ACLs. */
int rts_acl_grant(int fd, const char *path, unsigned owner_perms, uid_t uid, unsigned perms);

/* Remove a directory's default ACL, if it has one (path as for rts_acl_grant()). Returns
 * 0 or -errno. */
int rts_acl_drop_default(const char *path);

/* What a file's ACLs let others do. The group and named entries are given as written,
 * before the mask: a mask that hides an entry today is widened by any chmod g+...
 * (systemd's StateDirectoryMode= included), so the rules below judge the entries. */
struct rts_acl_view {
	bool extended;	       /* named entries or a mask: more than the mode's three triples */
	unsigned owner_perms;  /* the owner's entry */
	unsigned group_perms;  /* the owning group's entry */
	unsigned other_perms;  /* everyone else without an entry */
	unsigned mask;	       /* the mask entry; the group's entry when not extended */
	size_t named_users;    /* entries for named users */
	size_t named_groups;   /* entries for named groups */
	uid_t user;	       /* the first named user, when named_users > 0 */
	unsigned user_perms;   /* its entry */
	bool has_default;      /* a directory's default ACL, inherited by what is created in it */
};

/* Read the access and default ACL of a file (fd and path as for rts_acl_grant(); an fd must
 * not be O_PATH). Returns 0 with *v filled, or -errno. A file system without ACLs reads as
 * its mode (not extended). */
int rts_acl_view(int fd, const char *path, struct rts_acl_view *v);

/* The permissions (RTS_PERM_*) an account with uid and primary group gid gets on a file
 * (fd and path as for rts_acl_grant(); st its stat()), by the POSIX ACL access check:
 * owner, else a named-user entry, else the owning group or named-group entries, else
 * others; entries but the owner's limited by the mask. Supplementary groups are not
 * considered (the daemons are started with their primary group alone). Returns the bits,
 * or -errno when the ACL cannot be read. */
int rts_acl_perms_for(int fd, const char *path, const struct stat *st, uid_t uid, gid_t gid);

/* True when v gives nobody but the owner any access, except uid at most perms (uid may be
 * (uid_t)-1 for nobody): no group or other permission, no named group, no other named
 * user, no default ACL. What the daemons accept for their private roots. */
bool rts_acl_private_but(const struct rts_acl_view *v, uid_t uid, unsigned perms);

/* True when v is exactly what rts_acl_grant(owner_perms, uid, perms) writes, with no
 * default ACL. */
bool rts_acl_is_grant(const struct rts_acl_view *v, unsigned owner_perms, uid_t uid, unsigned perms);

/* A named entry of an access ACL: an account (group false) or a group, and its
 * permissions as written (before the mask: see struct rts_acl_view). */
struct rts_acl_named {
	bool group;
	id_t id;
	unsigned perms;
};

/* Find the first named entry of a file's access ACL (fd and path as for rts_acl_view())
 * that grants something (perms not 0) and that accept(e, arg) does not accept. Returns 1
 * with *found filled, 0 when there is none (or the file system has no ACLs), or -errno. */
int rts_acl_find_named(int fd, const char *path, bool (*accept)(const struct rts_acl_named *e, void *arg), void *arg,
		       struct rts_acl_named *found);

#endif
