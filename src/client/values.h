/*
 * values.h — what a value's client flags say (values.c), and what a reply's value
 * means: the lease placeholder, valid text.
 */
#ifndef MCFDW_VALUES_H
#define MCFDW_VALUES_H

#include "postgres.h"

#include "compress.h"
#include "server.h"

/* values.c: compressed and serialized values, as the client flags say; text */
extern bool McValueTextValid(const char *p, size_t len);
static inline bool
McValueCompressed(const McServerConfig *cfg, uint32 flags)
{
	return cfg->compression && (flags & cfg->compressed_flag) == cfg->compressed_flag;
}
extern struct varlena *McValueDecode(McServer *srv, const char *data, size_t len,
									 bool has_flags, uint32 flags, McZStatus *status);
extern char *McValueInflateInto(McServer *srv, const char *data, size_t len,
								char **buf, size_t *cap, size_t *outlen,
								const char *key, size_t keylen);
extern void McValueRaise(McServer *srv, McZStatus status, const char *key,
						 size_t keylen) McNoReturn();
extern void McValueCheckText(McServer *srv, bool has_flags, uint32 flags,
							 const char *key, size_t keylen, const char *bytes_hint);
/* McValueCheckText's hint for the SQL functions */
#define MC_BYTEA_HINT "Read it with the _bytea variant of the function"
extern bool McValueDeflate(McServer *srv, const char **data, size_t *len,
						   uint32 *flags);

#endif							/* MCFDW_VALUES_H */
