/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common/memfd.h"
#include "common/util.h"

int rts_memfd_writer_open(struct rts_memfd_writer *w, const char *name, size_t max)
{
	*w = (struct rts_memfd_writer)RTS_MEMFD_WRITER_INIT;
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	*w = (struct rts_memfd_writer){.fd = fd, .len = 0, .max = max};
	return 0;
}

int rts_memfd_writer_write(struct rts_memfd_writer *w, const void *data, size_t len)
{
	if (w->fd < 0)
		return -EBADF;
	if (len > w->max - w->len)
		return -EFBIG;
	int r = rts_write_all(w->fd, data, len);
	if (r < 0)
		return r;
	w->len += len;
	return 0;
}

void rts_memfd_writer_close(struct rts_memfd_writer *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

int rts_memfd_writer_seal(struct rts_memfd_writer *w)
{
	if (w->fd < 0)
		return -EBADF;
	if (fcntl(w->fd, F_ADD_SEALS, RTS_MEMFD_SEALS) < 0) {
		int r = -errno;
		rts_memfd_writer_close(w);
		return r;
	}
	return steal_fd(&w->fd);
}

int rts_memfd_from_buffer(const char *name, const void *data, size_t len)
{
	struct rts_memfd_writer w;
	int r = rts_memfd_writer_open(&w, name, len);
	if (r < 0)
		return r;
	r = rts_memfd_writer_write(&w, data, len);
	if (r < 0) {
		rts_memfd_writer_close(&w);
		return r;
	}
	return rts_memfd_writer_seal(&w);
}

int rts_memfd_check(int fd, size_t max, size_t *size)
{
	*size = 0;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EPERM;
	/* Only a memfd made with MFD_ALLOW_SEALING (or a shmem file) answers; anything else is
	 * EINVAL, which is "not ours" just the same. */
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & RTS_MEMFD_SEALS) != RTS_MEMFD_SEALS)
		return -EPERM;
	if (st.st_size < 0 || (uint64_t)st.st_size > max)
		return -EFBIG;
	*size = (size_t)st.st_size;
	return 0;
}

int rts_memfd_map(int fd, size_t max, const void **data, size_t *len)
{
	*data = NULL;
	*len = 0;
	size_t size;
	int r = rts_memfd_check(fd, max, &size);
	if (r < 0)
		return r;
	if (size == 0)
		return 0;
	void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*data = p;
	*len = size;
	return 0;
}

void rts_memfd_unmap(const void *data, size_t len)
{
	if (data && len)
		munmap((void *)data, len);
}

int rts_memfd_read(int fd, size_t max, char **data, size_t *len)
{
	*data = NULL;
	*len = 0;
	size_t size;
	int r = rts_memfd_check(fd, max, &size);
	if (r < 0)
		return r;
	char *buf = rts_xmalloc(size + 1);
	size_t got = 0;
	while (got < size) {
		ssize_t n = pread(fd, buf + got, size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			return n < 0 ? -errno : -EIO;
		}
		got += (size_t)n;
	}
	buf[size] = '\0';
	*data = buf;
	*len = size;
	return 0;
}
