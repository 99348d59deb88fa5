/* SPDX-License-Identifier: Apache-2.0 */
/* image build --precheck and --rich: images whose build context a script assembles first
 * (HACKING.md "Precheck runtime" and "Rich worker"): make-context.sh fills a fresh
 * temporary directory, docker builds it, the directory goes again. */
#include "config.h"

#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "common/log.h"
#include "common/util.h"

/* The context holds node and its libraries (about 100 MB), for the rich image also its
 * node_modules (a few hundred MB, many files). */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((flag == FTW_DP ? rmdir(path) : unlink(path)) < 0)
		log_warning_errno(errno, "cannot remove %s: %m", path);
	return 0;
}

static void remove_tree(const char *dir)
{
	/* FTW_PHYS: a symbolic link is removed, never followed. */
	if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0)
		log_warning_errno(errno, "cannot remove the build context %s: %m", dir);
}

static bool run_ok(char *const argv[], const char *what)
{
	const struct rts_spawn s = cli_docker_spawn(argv);
	struct rts_spawn_result res = {0};
	int r = rts_spawn_run(&s, NULL, 0, &res);
	bool ok = r == 0 && res.exited && res.status == 0;
	if (!ok) {
		char why[256];
		cli_docker_failure(r, &res, 0, why, sizeof(why));
		log_error("%s failed: %s", what, why);
	}
	rts_spawn_result_release(&res);
	return ok;
}

int cli_image_build_context(const char *what, const char *subdir, const char *tag, const char *dir,
			    const char *content)
{
	char abs_dir[PATH_MAX];
	if (!realpath(dir, abs_dir)) {
		log_error_errno(errno, "%s: %m (pass --dir with the %s directory; the source tree's is worker/%s)", dir,
				what, subdir);
		return CLI_EXIT_FAILED;
	}
	cleanup_free char *script = rts_xasprintf("%s/make-context.sh", abs_dir);
	struct stat st;
	if (stat(script, &st) < 0 || !S_ISREG(st.st_mode)) {
		log_error("%s has no make-context.sh: install the package, or pass --dir with the %s directory "
			  "(the source tree's is worker/%s)",
			  abs_dir, what, subdir);
		return CLI_EXIT_FAILED;
	}
	char abs_content[PATH_MAX];
	if (content && !realpath(content, abs_content)) {
		log_error_errno(errno, "--content %s: %m", content);
		return CLI_EXIT_FAILED;
	}
	cleanup_free char *ctx = rts_xasprintf("/tmp/roundtable-sandbox-%s-XXXXXX", subdir);
	if (!mkdtemp(ctx)) {
		log_error_errno(errno, "cannot create a build context directory: %m");
		return CLI_EXIT_FAILED;
	}
	/* make-context.sh takes an empty directory; sh, so a lost mode bit does not matter.
	 * It runs as the caller, with the caller's npm configuration (npm_config_* in the
	 * environment: registry, proxy, cache) where it runs npm. */
	char *make[] = {"/bin/sh", script, "--source", abs_dir, ctx, NULL, NULL, NULL};
	if (content) {
		make[4] = "--content";
		make[5] = abs_content;
		make[6] = ctx;
	}
	char *const build[] = {RTS_DOCKER, "build", "-t", (char *)tag, ctx, NULL};
	int ex = CLI_EXIT_FAILED;
	if (run_ok(make, "make-context.sh") && run_ok(build, RTS_DOCKER " build"))
		ex = CLI_EXIT_OK;
	remove_tree(ctx);
	return ex;
}
