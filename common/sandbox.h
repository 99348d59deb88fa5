/* Process sandboxing for the daemons, in two steps like OpenSSH's ssh-sandbox.h:
 * rts_sandbox_init() right at start, rts_sandbox_apply() once start-up is done. */
#ifndef RTS_SANDBOX_H
#define RTS_SANDBOX_H

/* Set PR_SET_NO_NEW_PRIVS and drop every capability (effective, permitted, inheritable,
 * ambient; the bounding set too when we are allowed to). Returns 0 or -errno. */
int rts_sandbox_init(void);

#endif
