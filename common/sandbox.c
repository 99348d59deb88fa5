#include "config.h"

#include <cap-ng.h>
#include <sys/prctl.h>

#include "common/sandbox.h"
#include "common/util.h"

int rts_sandbox_init(void)
{
	/* Nothing we exec (docker, host tools, key commands) may gain privileges via setuid
	 * or file capabilities. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	/* Dropping the bounding set needs CAP_SETPCAP; a non-root service account has no
	 * capabilities to bound anyway. */
	if (capng_get_caps_process() < 0)
		return -EPERM;
	int can_bound = capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP);
	capng_clear(can_bound ? CAPNG_SELECT_ALL : CAPNG_SELECT_BOTH);
	if (capng_apply(can_bound ? CAPNG_SELECT_ALL : CAPNG_SELECT_BOTH) < 0)
		return -EPERM;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	return 0;
}
