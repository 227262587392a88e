/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "query/upstream.h"
#include "query/wiki-client.h"

/* Shared between the commands of wikiweb-upstream-tool. */
void tool_print_json(json_object *o);
const char *tool_startswith(const char *s, const char *prefix);
unsigned tool_limit(void);
int wiki_main(Upstream *u, sd_event *e, int argc, char **argv, const WikiClientSettings *settings);
