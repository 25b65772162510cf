/*
 * client.h — the client layer's common header (src/client/), for the layers
 * above it (sql/, fdw/): the headers every one of their files needs (the
 * server entry, its options, health, ttl and value rules).  It declares
 * nothing itself.  A file above that runs requests also includes the
 * engine's header it uses by name (engine.h, keys.h, run.h, batch.h,
 * counters.h, rowlayout.h), so its includes say which engine it drives;
 * pipeline.h is the engine's own (engine_layer.py checks no file above
 * calls it).  Files inside client/ include the module headers they need.
 */
#ifndef MCFDW_CLIENT_H
#define MCFDW_CLIENT_H

#include "health.h"
#include "options.h"
#include "server.h"
#include "server_cache.h"
#include "ttl.h"
#include "values.h"

#endif							/* MCFDW_CLIENT_H */
