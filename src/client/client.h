/*
 * client.h — the client layer's public header (src/client/), for the layers
 * above it (sql/, fdw/): every module header of the client's that they use.
 * It declares nothing itself; files inside client/ include the module
 * headers they need.
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
