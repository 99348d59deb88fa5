/* The roots every daemon keeps (runRoot, workspaceRoot, the state file's directory). */
#ifndef RTS_PRIVDIR_H
#define RTS_PRIVDIR_H

#include <stddef.h>

/* Make sure path is a private directory of this service account and open it: missing
 * components are created 0700 (mkdir -p; existing parents are left alone), then path is
 * opened O_DIRECTORY|O_NOFOLLOW and must be a directory (not a symbolic link) owned by our
 * effective uid with no group/other permission bits (seed: directories dedicated to the
 * package, owned by the service account, insecure permissions refused at start-up).
 * what names the config key for messages ("runRoot", "workspaceRoot", "stateFile").
 * Returns an O_RDONLY|O_DIRECTORY fd (caller closes), or -errno with one line in err that
 * names the key and the path and says how to fix it (a chown or chmod command). */
int rts_private_dir_open(const char *what, const char *path, char *err, size_t errlen);

#endif
