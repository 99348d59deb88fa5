/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's baseline container program: read stdin to the end (bounded) and print
 * one line, like a worker that needs no broker. Linked statically into a FROM scratch
 * image by tests/bench/turns.py. */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
	char buf[4096];
	size_t total = 0;
	ssize_t n;
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) > 0 && total < (1u << 20))
		total += (size_t)n;
	printf("{\"v\":1,\"reply\":\"read %zu bytes\"}\n", total);
	return 0;
}
