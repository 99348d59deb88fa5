/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <limits.h>
#include <sys/stat.h>

#include "common/limits.h"
#include "common/paths.h"
#include "common/util.h"

bool rts_path_under(const char *path, const char *dir)
{
	if (!path || !dir || path[0] != '/' || dir[0] != '/')
		return false;
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1)
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* path with symbolic links resolved; for a path that does not exist yet, its directory
 * resolved and the last component added. NULL when neither resolves. */
static char *resolve(const char *path)
{
	char *r = realpath(path, NULL);
	if (r)
		return r;
	const char *slash = strrchr(path, '/');
	if (!slash || slash[1] == '\0')
		return NULL;
	cleanup_free char *parent = slash == path ? rts_xstrdup("/") : rts_xstrndup(path, (size_t)(slash - path));
	cleanup_free char *rp = realpath(parent, NULL);
	if (!rp)
		return NULL;
	return rts_xasprintf("%s%s", strcmp(rp, "/") == 0 ? "" : rp, slash);
}

bool rts_path_within(const char *path, const char *dir)
{
	if (rts_path_under(path, dir))
		return true;
	if (!path || !dir)
		return false;
	cleanup_free char *rp = resolve(path);
	cleanup_free char *rd = realpath(dir, NULL);
	const char *paths[] = {path, rp}, *dirs[] = {dir, rd};
	for (size_t i = 0; i < 2; i++)
		for (size_t j = 0; j < 2; j++)
			if (paths[i] && dirs[j] && rts_path_under(paths[i], dirs[j]))
				return true;
	return false;
}

size_t rts_broker_sock_path_len(const char *run_root)
{
	return strlen(run_root) + 1 + RTS_TURN_ID_LEN + 1 + strlen(RTS_BROKER_SOCK_NAME);
}

size_t rts_rich_broker_sock_path_len(const char *run_root)
{
	return strlen(run_root) + 1 + strlen(RTS_RICH_DIR_PREFIX) + 16 + 1 + strlen(RTS_BROKER_SOCK_NAME);
}

int rts_time_zone_file(const char *tz, char **path)
{
	*path = rts_xasprintf(RTS_ZONEINFO_DIR "/%s", tz);
	struct stat st;
	if (stat(*path, &st) < 0)
		return -errno;
	return S_ISREG(st.st_mode) ? 0 : -ENOENT;
}
