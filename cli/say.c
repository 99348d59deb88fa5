/* SPDX-License-Identifier: Apache-2.0 */
/* say: one guest turn from the command line, answered like a bot must answer it. */
#include "config.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "common/base64.h"
#include "common/json.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/termtext.h"
#include "common/util.h"

struct say_args {
	const char *author, *name, *principal, *tier;
	bool from_stdin;
	/* Rich channels. */
	const char *images[RTS_RICH_IMAGES_MAX + 1];
	size_t n_images;
	const char *urls[RTS_RICH_ATTACHMENTS_MAX + 1];
	size_t n_urls;
	const char *files_dir;
};

static int say_option(int opt, const char *arg, void *ctx)
{
	struct say_args *a = ctx;
	if (opt == 's') {
		a->from_stdin = true;
		return 0;
	}
	if (opt == 'i') {
		if (a->n_images == RTS_RICH_IMAGES_MAX) {
			log_error("--image may be given at most %u times", RTS_RICH_IMAGES_MAX);
			return -1;
		}
		a->images[a->n_images++] = arg;
		return 0;
	}
	if (opt == 'u') {
		if (a->n_urls == RTS_RICH_ATTACHMENTS_MAX || !cli_arg_ok(arg, RTS_ATTACH_URL_MAX, false)) {
			log_error("--attach may be given at most %u times, each URL at most %u bytes",
				  RTS_RICH_ATTACHMENTS_MAX, RTS_ATTACH_URL_MAX);
			return -1;
		}
		a->urls[a->n_urls++] = arg;
		return 0;
	}
	if (opt == 'f') {
		a->files_dir = arg;
		return 0;
	}
	const char **slot = opt == 'a' ? &a->author : opt == 'n' ? &a->name : opt == 'p' ? &a->principal : &a->tier;
	static const char *const names[] = {['a'] = "--author", ['n'] = "--name", ['p'] = "--principal", ['t'] = "--tier"};
	if (!cli_arg_ok(arg, RTS_SPEAKER_FIELD_MAX, false)) {
		log_error("%s must be 1 to %u bytes of UTF-8", names[opt], RTS_SPEAKER_FIELD_MAX);
		return -1;
	}
	*slot = arg;
	return 0;
}

/* Read all of standard input as a say TEXT: at most RTS_RICH_TEXT_BYTES_MAX bytes (the
 * longest of any mode; statd holds each channel to its own), one trailing
 * newline dropped (as `echo` and here-documents add one). Returns a NUL-terminated string the
 * caller frees, or NULL after logging why (too long, a NUL byte, a read error). */
static char *read_stdin_text(void)
{
	/* Up to two bytes past the limit: the newline that may be dropped, and one that shows
	 * the input is too long even then. */
	size_t want = RTS_RICH_TEXT_BYTES_MAX + 2, len = 0;
	char *buf = rts_xcalloc(want + 1, 1);
	while (len < want) {
		ssize_t n = read(STDIN_FILENO, buf + len, want - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			log_error_errno(errno, "cannot read TEXT from standard input: %m");
			free(buf);
			return NULL;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (len > RTS_RICH_TEXT_BYTES_MAX) {
		log_error("TEXT on standard input is longer than %u bytes", RTS_RICH_TEXT_BYTES_MAX);
		free(buf);
		return NULL;
	}
	if (memchr(buf, '\0', len)) {
		log_error("TEXT on standard input contains a NUL byte");
		free(buf);
		return NULL;
	}
	return buf;
}

/* The media type of an image file from its first bytes (statd checks the same signatures),
 * or NULL. */
static const char *image_mime(const unsigned char *b, size_t n)
{
	if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0)
		return "image/png";
	if (n >= 3 && memcmp(b, "\xff\xd8\xff", 3) == 0)
		return "image/jpeg";
	if (n >= 6 && (memcmp(b, "GIF87a", 6) == 0 || memcmp(b, "GIF89a", 6) == 0))
		return "image/gif";
	if (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WEBP", 4) == 0)
		return "image/webp";
	return NULL;
}

/* --image FILE as {"mime","data"}, or NULL after saying why. *total adds its size. */
static json_object *read_image(const char *path, uint64_t *total)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		log_error_errno(errno, "--image %s: %m", path);
		return NULL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)RTS_RICH_IMAGE_BYTES_MAX) {
		log_error("--image %s: must be a regular file of at most %u bytes", path, RTS_RICH_IMAGE_BYTES_MAX);
		return NULL;
	}
	size_t len = (size_t)st.st_size;
	cleanup_free unsigned char *buf = rts_xmalloc(len + 1);
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			log_error_errno(n < 0 ? errno : EIO, "--image %s: cannot read it: %m", path);
			return NULL;
		}
		got += (size_t)n;
	}
	const char *mime = image_mime(buf, len);
	if (!mime) {
		log_error("--image %s: not a PNG, JPEG, WebP or GIF image", path);
		return NULL;
	}
	*total += len;
	if (*total > RTS_RICH_IMAGES_TOTAL_MAX) {
		log_error("--image: the images are more than %u bytes in all", RTS_RICH_IMAGES_TOTAL_MAX);
		return NULL;
	}
	size_t b64_len;
	cleanup_free char *b64 = rts_base64_encode(buf, len, &b64_len);
	json_object *img = json_object_new_object();
	json_object_object_add(img, "mime", json_object_new_string(mime));
	json_object_object_add(img, "data", json_object_new_string_len(b64, (int)b64_len));
	return img;
}

/* A reply file's name as it is created below --files-dir: statd checked it already (no
 * '/', no leading dot, no control or format character); this keeps it so whatever sent it.
 * '/', each control or format character (rts_code_point_hidden()) and each byte that is not
 * UTF-8 becomes '_'; a sequence that does not fit in out is left off whole. */
static void safe_name(const char *in, char *out, size_t outlen)
{
	size_t n = 0, len = strlen(in);
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t k = rts_utf8_decode(in + i, len - i, &cp);
		if (n == 0 && in[i] == '.') {
			i++;
			continue;
		}
		if (k == 0 || cp == '/' || rts_code_point_hidden(cp)) {
			if (n + 1 >= outlen)
				break;
			out[n++] = '_';
			i += k ? k : 1;
			continue;
		}
		if (n + k >= outlen)
			break;
		memcpy(out + n, in + i, k);
		n += k;
		i += k;
	}
	out[n] = '\0';
	if (n == 0)
		snprintf(out, outlen, "file");
}

/* Write the reply's files below dir. Returns CLI_EXIT_OK or CLI_EXIT_FAILED after saying
 * which file could not be written (the others are written still). */
static int write_files(const char *dir, json_object *files)
{
	cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		log_error_errno(errno, "--files-dir %s: %m", dir);
		return CLI_EXIT_FAILED;
	}
	int ex = CLI_EXIT_OK;
	for (size_t i = 0, n = json_object_array_length(files); i < n; i++) {
		json_object *f = json_object_array_get_idx(files, i);
		const char *name = rts_json_get_string(f, "name");
		json_object *data = rts_json_get(f, "data");
		if (!name || !data || !json_object_is_type(data, json_type_string)) {
			log_error("statd's reply has a file without a name or data");
			ex = CLI_EXIT_FAILED;
			continue;
		}
		char safe[RTS_RICH_FILE_NAME_MAX + 1];
		safe_name(name, safe, sizeof(safe));
		size_t dlen = (size_t)json_object_get_string_len(data);
		size_t want = rts_base64_decoded_len(json_object_get_string(data), dlen);
		if (want == SIZE_MAX || want > RTS_RICH_REPLY_FILE_BYTES_MAX) {
			log_error("the reply's file %zu is not base64 of at most %u bytes", i, RTS_RICH_REPLY_FILE_BYTES_MAX);
			ex = CLI_EXIT_FAILED;
			continue;
		}
		cleanup_free unsigned char *bytes = rts_xmalloc(want + 1);
		long got = rts_base64_decode(json_object_get_string(data), dlen, bytes, want);
		/* Never over a file that is there, never through a link planted in DIR. */
		int fd = got < 0 ? -1 : openat(dfd, safe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			if (got < 0)
				log_error("the reply's file %zu could not be decoded", i);
			else
				log_error_errno(errno, "--files-dir %s: cannot create %s: %m", dir, safe);
			ex = CLI_EXIT_FAILED;
			continue;
		}
		int r = rts_write_all(fd, bytes, (size_t)got);
		if (close(fd) < 0 && r == 0)
			r = -errno;
		if (r < 0) {
			log_error_errno(r, "--files-dir %s: cannot write %s: %m", dir, safe);
			ex = CLI_EXIT_FAILED;
		}
	}
	return ex;
}

/* say CHANNEL --author ID --name NAME [--principal P] [--tier T] [--image FILE]...
 *     [--attach URL]... [--files-dir DIR] (TEXT | --stdin) */
int cli_cmd_say(const struct rts_opts *o, int argc, char **argv)
{
	static const struct option say_options[] = {
		{"author", required_argument, NULL, 'a'},
		{"name", required_argument, NULL, 'n'},
		{"principal", required_argument, NULL, 'p'},
		{"tier", required_argument, NULL, 't'},
		{"stdin", no_argument, NULL, 's'},
		{"image", required_argument, NULL, 'i'},
		{"attach", required_argument, NULL, 'u'},
		{"files-dir", required_argument, NULL, 'f'},
		{0},
	};
	struct say_args a = {.tier = "member"};
	int i = cli_parse_sub_options(argc, argv, say_options, say_option, &a);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (argc - i != (a.from_stdin ? 1 : 2))
		return cli_usage_error(a.from_stdin ? "say --stdin takes CHANNEL only (TEXT comes from standard input)"
						: "say takes CHANNEL and TEXT (one argument; put -- before a TEXT "
						  "starting with -), or CHANNEL and --stdin");
	if (!a.author || !a.name)
		return cli_usage_error("say needs --author ID and --name NAME");
	const char *channel = argv[i];
	int ex = cli_check_channel(channel);
	if (ex != CLI_EXIT_OK)
		return ex;
	/* On the command line, TEXT is visible to every local user (ps, /proc/PID/cmdline). */
	cleanup_free char *stdin_text = NULL;
	if (a.from_stdin && !(stdin_text = read_stdin_text()))
		return CLI_EXIT_USAGE;
	const char *text = a.from_stdin ? stdin_text : argv[i + 1];
	/* The longest text of any mode; statd holds each channel to its own. */
	if (!cli_arg_ok(text, RTS_RICH_TEXT_BYTES_MAX, true))
		return cli_usage_error(strlen(text) > RTS_RICH_TEXT_BYTES_MAX ? "TEXT must be at most %u bytes"
									      : "TEXT must be valid UTF-8 (at most %u bytes)",
				   RTS_RICH_TEXT_BYTES_MAX);

	cleanup_json json_object *req = cli_new_request("message");
	json_object_object_add(req, "channel", json_object_new_string(channel));
	json_object_object_add(req, "guild", json_object_new_boolean(true));
	json_object *author = json_object_new_object();
	json_object_object_add(author, "id", json_object_new_string(a.author));
	json_object_object_add(author, "name", json_object_new_string(a.name));
	json_object_object_add(author, "principalId", json_object_new_string(a.principal ? a.principal : a.author));
	json_object_object_add(author, "tier", json_object_new_string(a.tier));
	json_object_object_add(author, "bot", json_object_new_boolean(false));
	json_object_object_add(author, "integration", json_object_new_boolean(false));
	json_object_object_add(req, "author", author);
	json_object_object_add(req, "addressed", json_object_new_boolean(true));
	json_object_object_add(req, "text", json_object_new_string(text));
	if (a.n_urls) {
		json_object *list = json_object_new_array();
		for (size_t k = 0; k < a.n_urls; k++) {
			json_object *att = json_object_new_object();
			json_object_object_add(att, "url", json_object_new_string(a.urls[k]));
			json_object_array_add(list, att);
		}
		json_object_object_add(req, "attachments", list);
	} else {
		json_object_object_add(req, "attachments", json_object_new_int(0));
	}
	if (a.n_images) {
		json_object *list = json_object_new_array();
		json_object_object_add(req, "images", list);
		uint64_t total = 0;
		for (size_t k = 0; k < a.n_images; k++) {
			json_object *img = read_image(a.images[k], &total);
			if (!img)
				return CLI_EXIT_USAGE;
			json_object_array_add(list, img);
		}
	}

	cleanup_control struct cli_control *c = NULL;
	cleanup_json json_object *answer = NULL;
	int64_t id;
	ex = cli_control_request(o, req, &c, &id, &answer);
	if (ex != CLI_EXIT_OK)
		return ex;
	const char *route = rts_json_get_string(answer, "route");
	if (!route) {
		log_error("statd's answer has no route: the message was not routed");
		return CLI_EXIT_FAILED;
	}
	if (strcmp(route, "pass") == 0) {
		log_error("not sandboxed: the channel is not in sandbox mode (route pass); fix: roundtable-sandbox on "
			  "CHANNEL");
		return CLI_EXIT_PASS;
	}
	if (strcmp(route, "drop") == 0) {
		log_error("dropped: the channel is sandboxed but the message is not eligible (route drop)");
		return CLI_EXIT_DROP;
	}
	if (strcmp(route, "sandbox") != 0) {
		log_error("statd answered with an unknown route \"%s\"", cli_statd_word(route, "?"));
		return CLI_EXIT_FAILED;
	}

	cleanup_json json_object *event = NULL;
	const char *why = NULL;
	int r = cli_control_wait(c, id, true, rts_now_ms() + CLI_QUEUED_TIMEOUT_MS, &event, &why);
	if (r < 0)
		return cli_wait_failed(r, why);
	const char *kind = rts_json_get_string(event, "event");
	if (kind && strcmp(kind, "reply") == 0) {
		json_object *t = rts_json_get(event, "text");
		if (!t || !json_object_is_type(t, json_type_string)) {
			log_error("statd's reply event lacks \"text\"");
			return CLI_EXIT_FAILED;
		}
		const char *s = json_object_get_string(t);
		size_t len = (size_t)json_object_get_string_len(t);
		if (isatty(STDOUT_FILENO))
			rts_term_escape(stdout, s, len, RTS_TERM_PROSE);
		else
			fwrite(s, 1, len, stdout);
		putchar('\n');
		json_object *files = rts_json_get(event, "files");
		size_t n_files = files && json_object_is_type(files, json_type_array) ? json_object_array_length(files) : 0;
		if (n_files && a.files_dir)
			return write_files(a.files_dir, files);
		if (n_files)
			log_warning("the reply carries %zu file(s); give --files-dir DIR to keep them", n_files);
		return CLI_EXIT_OK;
	}
	if (kind && strcmp(kind, "error") == 0) {
		log_error("the turn failed: %s", cli_statd_word(rts_json_get_string(event, "error"), "unknown error"));
		return CLI_EXIT_FAILED;
	}
	log_error("statd sent an unknown event");
	return CLI_EXIT_FAILED;
}
