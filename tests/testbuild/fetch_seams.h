/* SPDX-License-Identifier: Apache-2.0 */
/* The fetch test seams of tests/testbuild's fetch build of brokerd (never installed; see
 * tests/testbuild/Makemodule.am). */
#ifndef TESTS_TESTBUILD_FETCH_SEAMS_H
#define TESTS_TESTBUILD_FETCH_SEAMS_H

#ifndef RTS_FETCH_TEST_SEAMS
#error "tests/testbuild/fetch_seams.h is for the fetch test build only"
#endif

/* Install the controlled fetch's test seams (common/fetch_seams.h) from the environment,
 * or exit with a message when it does not name them:
 *
 *   RTS_TESTBUILD_FETCH_PORTS  the first line tests/fakes/fetch_fake.py prints (a JSON
 *                              object of its listeners' loopback ports)
 *   RTS_TESTBUILD_FETCH_CA     the CA file that signed the fake's certificate
 *   RTS_TESTBUILD_FETCH_HOSTS  the resolver's table, read again at every lookup so a test
 *                              can add names while brokerd runs: one line per name,
 *                              "NAME ANSWER [ANSWER...]", where the n-th lookup of NAME
 *                              gets the n-th ANSWER and the last one repeats; an ANSWER is
 *                              comma-separated addresses, "EMPTY" (no address) or
 *                              "NXDOMAIN". A name not listed does not exist.
 *
 * Connections are carried to the fake as tests/unit/fetch_rig.h describes (the rig's
 * dialer): every vetted address, however public it looks, ends on loopback. Call before
 * the seccomp filter is applied; logs one warning that this is a test build. */
void brokerd_testbuild_fetch_seams(void);

#endif
