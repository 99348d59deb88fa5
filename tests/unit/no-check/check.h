/* SPDX-License-Identifier: Apache-2.0 */
/* Stands in for Check's header when configure did not find Check (configure.ac): the
 * programs build without it, and `make check` stops at its first suite with this. */
#error "the unit test suites need Check, which configure did not find: install the Debian package check (pkg-config module check >= 0.15) and run configure again"
