/* SPDX-License-Identifier: Apache-2.0 */
/* Running the docker CLI from the admin CLI: execv of an absolute path, never a shell, so
 * no argument (an image tag, a container name) is ever interpreted by anything but docker. */
#ifndef CLI_SPAWN_H
#define CLI_SPAWN_H

#include <stddef.h>

/* Run argv (argv[0] an absolute path, NULL-terminated) with stdin from /dev/null and
 * stderr inherited. When out is NULL stdout is inherited too; otherwise stdout is captured
 * into a new NUL-terminated string *out of at most max_out bytes (caller frees). A
 * timeout_ms of 0 means no deadline; otherwise the child is killed with SIGKILL when it
 * has not finished after timeout_ms milliseconds.
 * Returns the child's exit status (0..255) once it exited, or -errno: -ETIMEDOUT (deadline
 * passed, child killed and reaped), -EFBIG (more than max_out bytes of output, child
 * killed and reaped), -ECHILD (child died from a signal), or an error from pipe/fork. An
 * exec failure shows as exit status 127. */
int cli_spawn(char *const argv[], char **out, size_t max_out, unsigned timeout_ms);

#endif
