/* A test plugin for the native ABI v1, written against the seed's C
 * shapes only. Tools:
 *   word_count  {"text": "..."} -> "N words"
 *   whoami      returns the invocation JSON it was given
 *   fail        a recoverable error result (is_error true)
 *   crash       dereferences NULL (the host must die, not the daemon)
 *   slow        sleeps {"secs": N} seconds
 *   remove      declares an irreversible delete_file effect that needs
 *               confirmation and a dry run first; says whether this call
 *               was the dry run
 * It counts the buffers it hands out and the ones given back to
 * buffer_free; plugin_drop writes "allocs=A frees=F live=L drops=1" to
 * STATS_PATH when that is compiled in (-DSTATS_PATH="...").
 * -DABI=2 builds a plugin that answers with another ABI version;
 * -DREFUSE builds one whose init refuses the host's version (-2).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef ABI
#define ABI 1
#endif

typedef struct { uint8_t *ptr; size_t len; size_t cap; } CortexBuffer;
typedef struct { uint32_t abi_version; } CortexHostApi;
typedef struct {
	uint32_t abi_version;
	void *plugin;
	CortexBuffer (*plugin_info)(void *);
	size_t (*tool_count)(void *);
	CortexBuffer (*tool_descriptor)(void *, size_t);
	CortexBuffer (*tool_execute)(void *, CortexBuffer, CortexBuffer, CortexBuffer);
	void (*plugin_drop)(void *);
	void (*buffer_free)(CortexBuffer);
} CortexPluginApi;

struct state { long allocs, frees; };

static CortexBuffer out(struct state *s, const char *str)
{
	size_t n = strlen(str);
	CortexBuffer b = {malloc(n + 16), n, n + 16};
	memcpy(b.ptr, str, n);
	s->allocs++;
	return b;
}

static struct state *global;

static void buffer_free(CortexBuffer b)
{
	if (b.ptr == NULL)
		return;
	free(b.ptr);
	if (global)
		global->frees++;
}

static CortexBuffer plugin_info(void *p)
{
	return out(p, "{\"name\":\"hello-c\",\"version\":\"0.1.0\",\"description\":\"C test plugin\"}");
}

static const char *descriptors[] = {
	"{\"name\":\"word_count\",\"description\":\"Count words in a text string.\","
	"\"input_schema\":{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]},"
	"\"timeout_secs\":null,\"capabilities\":{\"emits_progress\":false,\"emits_observer_text\":false,\"background_safe\":true}}",
	"{\"name\":\"whoami\",\"description\":\"Return the invocation context.\",\"input_schema\":{\"type\":\"object\"},"
	"\"capabilities\":{\"emits_progress\":false,\"emits_observer_text\":false,\"background_safe\":true}}",
	"{\"name\":\"fail\",\"description\":\"Always fails softly.\",\"input_schema\":{\"type\":\"object\"},"
	"\"capabilities\":{\"emits_progress\":false,\"emits_observer_text\":false,\"background_safe\":true}}",
	"{\"name\":\"crash\",\"description\":\"Crashes its host.\",\"input_schema\":{\"type\":\"object\"},"
	"\"capabilities\":{\"emits_progress\":false,\"emits_observer_text\":false,\"background_safe\":false}}",
	"{\"name\":\"slow\",\"description\":\"Sleeps.\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"secs\":{\"type\":\"integer\"}}},"
	"\"timeout_secs\":2,\"capabilities\":{\"emits_progress\":false,\"emits_observer_text\":false,\"background_safe\":false}}",
	"{\"name\":\"remove\",\"description\":\"Pretends to delete a file.\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]},"
	"\"capabilities\":{\"emits_progress\":false,\"emits_observer_text\":false,\"background_safe\":false,"
	"\"effects\":[{\"kind\":\"delete_file\",\"target\":\"/tmp\",\"reversibility\":\"irreversible\",\"confirmation\":\"always\",\"dry_run\":\"required_before_execute\"}]}}",
};
#define NTOOLS (sizeof descriptors / sizeof descriptors[0])

static size_t tool_count(void *p) { (void)p; return NTOOLS; }

static CortexBuffer tool_descriptor(void *p, size_t i)
{
	if (i >= NTOOLS) {
		CortexBuffer e = {0, 0, 0};
		return e;
	}
	return out(p, descriptors[i]);
}

/* copy a borrowed buffer into a NUL-terminated string */
static char *str(CortexBuffer b)
{
	char *s = malloc(b.len + 1);
	if (b.len)
		memcpy(s, b.ptr, b.len);
	s[b.len] = 0;
	return s;
}

static int count_words(const char *in)
{
	const char *t = strstr(in, "\"text\"");
	if (!t)
		return -1;
	t = strchr(t + 6, '"');
	if (!t)
		return -1;
	int n = 0, inword = 0;
	for (t++; *t && *t != '"'; t++) {
		int space = *t == ' ' || *t == '\t' || *t == '\n';
		if (!space && !inword)
			n++;
		inword = !space;
	}
	return n;
}

static CortexBuffer tool_execute(void *p, CortexBuffer name, CortexBuffer input, CortexBuffer inv)
{
	struct state *s = p;
	char *tool = str(name), *in = str(input), *ctx = str(inv);
	char msg[4096];
	CortexBuffer r;
	if (strcmp(tool, "word_count") == 0) {
		snprintf(msg, sizeof msg, "{\"output\":\"%d words\",\"media\":[],\"is_error\":false}", count_words(in));
	} else if (strcmp(tool, "whoami") == 0) {
		char esc[3000];
		size_t j = 0;
		for (size_t i = 0; ctx[i] && j < sizeof esc - 3; i++) {
			if (ctx[i] == '"' || ctx[i] == '\\')
				esc[j++] = '\\';
			esc[j++] = ctx[i];
		}
		esc[j] = 0;
		snprintf(msg, sizeof msg, "{\"output\":\"%s\",\"media\":[],\"is_error\":false}", esc);
	} else if (strcmp(tool, "fail") == 0) {
		snprintf(msg, sizeof msg, "{\"output\":\"it went wrong\",\"media\":[],\"is_error\":true}");
	} else if (strcmp(tool, "crash") == 0) {
		volatile int *null = NULL;
		*null = 1;
		msg[0] = 0;
	} else if (strcmp(tool, "slow") == 0) {
		const char *t = strstr(in, "\"secs\"");
		int secs = t ? atoi(strchr(t, ':') + 1) : 1;
		sleep(secs);
		snprintf(msg, sizeof msg, "{\"output\":\"slept %d\",\"media\":[],\"is_error\":false}", secs);
	} else if (strcmp(tool, "remove") == 0) {
		int dry = strstr(ctx, "\"dry_run\":true") != NULL;
		snprintf(msg, sizeof msg, "{\"output\":\"%s\",\"media\":[],\"is_error\":false}", dry ? "would remove" : "removed");
	} else {
		snprintf(msg, sizeof msg, "{\"output\":\"no such tool\",\"media\":[],\"is_error\":true}");
	}
	r = out(s, msg);
	free(tool);
	free(in);
	free(ctx);
	return r;
}

static void plugin_drop(void *p)
{
	struct state *s = p;
#ifdef STATS_PATH
	FILE *f = fopen(STATS_PATH, "a");
	if (f) {
		fprintf(f, "allocs=%ld frees=%ld live=%ld drops=1\n", s->allocs, s->frees, s->allocs - s->frees);
		fclose(f);
	}
#endif
	global = NULL;
	free(s);
}

int32_t cortex_plugin_init(const CortexHostApi *host, CortexPluginApi *api)
{
	if (host == NULL || api == NULL)
		return -1;
#ifdef REFUSE
	return -2;
#endif
	if (host->abi_version != 1)
		return -2;
	struct state *s = calloc(1, sizeof *s);
	global = s;
	api->abi_version = ABI;
	api->plugin = s;
	api->plugin_info = plugin_info;
	api->tool_count = tool_count;
	api->tool_descriptor = tool_descriptor;
	api->tool_execute = tool_execute;
	api->plugin_drop = plugin_drop;
	api->buffer_free = buffer_free;
	return 0;
}
