/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <getopt.h>

#include "common/daemon.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"

int rts_parse_options(int argc, char **argv, const char *usage, struct rts_opts *o)
{
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"runtime-dir", required_argument, NULL, 'r'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	o->config_path = RTS_DEFAULT_CONFIG;
	o->runtime_dir = RTS_DEFAULT_RUNTIME_DIR;
	int c;
	/* '+': stop at the first non-option, so subcommands keep their own options. */
	while ((c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->config_path = optarg;
			break;
		case 'r':
			o->runtime_dir = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(0);
		case 'V':
			printf("%s\n", PACKAGE_STRING);
			exit(0);
		default:
			fputs(usage, stderr);
			exit(2);
		}
	}
	return optind;
}

int rts_check_identity(const struct rts_config *c, char *err, size_t errlen)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (uid == 0) {
		snprintf(err, errlen,
			 "refusing to run as root: start this program as the service account "
			 "(for example with systemd User= or runuser -u)");
		return -EPERM;
	}
	if (c->has_uid && c->uid != uid) {
		snprintf(err, errlen, "%s: uid: is %lu but this process runs as uid %lu; they must match", c->path,
			 (unsigned long)c->uid, (unsigned long)uid);
		return -EPERM;
	}
	if (c->has_gid && c->gid != gid) {
		snprintf(err, errlen, "%s: gid: is %lu but this process runs as gid %lu; they must match", c->path,
			 (unsigned long)c->gid, (unsigned long)gid);
		return -EPERM;
	}
	return 0;
}

struct rts_config *rts_daemon_load_config(const struct rts_opts *o)
{
	char err[1024];
	struct rts_config *c = rts_config_load(o->config_path, err, sizeof(err));
	if (!c) {
		log_error("%s", err);
		exit(1);
	}
	if (rts_check_identity(c, err, sizeof(err)) < 0) {
		log_error("%s", err);
		rts_config_free(c);
		exit(1);
	}
	return c;
}
