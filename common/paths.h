/* SPDX-License-Identifier: Apache-2.0 */
/* Paths every program judges the same way (the daemons at start-up, doctor when it
 * predicts what they will say): whether one lies inside another, where a time zone's file
 * is, how long a turn's broker socket path gets. */
#ifndef RTS_PATHS_H
#define RTS_PATHS_H

#include <stdbool.h>
#include <stddef.h>

/* The file name of a turn's broker socket, in runRoot/<turn id>/. */
#define RTS_BROKER_SOCK_NAME "broker.sock"
/* Where the time zones are: runnerd formats the worker's "now" in timeZone with them. */
#define RTS_ZONEINFO_DIR "/usr/share/zoneinfo"

/* True when path is dir or lies below it, component by component ("/var/lib/docker2" is
 * not inside "/var/lib/docker"; "/" holds every absolute path; trailing slashes on dir do
 * not count). Strings only, no file system access; a relative path is inside nothing. */
bool rts_path_under(const char *path, const char *dir);

/* rts_path_under() on the paths as written and with symbolic links resolved: path itself
 * where it exists, else its parent directory (a file not created yet), and dir where it
 * exists. Any pairing that matches counts, so a symbolic link cannot hide an overlap
 * (seed: stateFile outside both roots; no root inside Docker's data root). */
bool rts_path_within(const char *path, const char *dir);

/* Length in characters of runRoot/<turn id>/broker.sock for this run_root: what must fit
 * RTS_BROKER_SOCK_PATH_MAX (seed: broker socket paths of at most 100 characters). */
size_t rts_broker_sock_path_len(const char *run_root);
/* The same for a rich channel's runRoot/rich-<16 hex>/broker.sock (DESIGN.md 8.5), which
 * is longer: runnerd checks it at start when the config has rich mode. */
#define RTS_RICH_DIR_PREFIX "rich-"
size_t rts_rich_broker_sock_path_len(const char *run_root);

/* The zone file of tz (a name the config accepted) in RTS_ZONEINFO_DIR, newly allocated in
 * *path (caller frees, also on failure). Returns 0 when it is a regular file, -ENOENT when
 * it is anything else or missing, or stat()'s -errno. */
int rts_time_zone_file(const char *tz, char **path);

#endif
