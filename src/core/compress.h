/*
 * compress.h — zlib streams for values compressed by memcached clients.
 *
 * Owns: inflating a zlib stream into caller-owned buffers in steps (the
 * inflated size is not stored anywhere, so the caller grows its buffer and
 * decides when it is too large), and deflating a value.  Must not: include
 * PostgreSQL headers, allocate caller-visible memory, or decide limits.
 * It keeps one libdeflate decompressor, a compressor per level in use and
 * one zlib inflate stream per process (libdeflate first, zlib for a bad
 * stream or one that fills the caller's bound), allocated once and reset
 * before every use, so an error raised between two steps leaves nothing to
 * free.
 */
#ifndef MCFDW_COMPRESS_H
#define MCFDW_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum McZStatus
{
	MC_Z_DONE = 0,				/* the stream ended: *produced bytes in all */
	MC_Z_FULL,					/* dst is full and the stream goes on */
	MC_Z_CORRUPT,				/* not a zlib stream, bad data, bad checksum,
								 * or bytes after its end */
	MC_Z_TRUNCATED,				/* the input ended inside the stream */
	MC_Z_NOMEM					/* zlib could not allocate its state */
} McZStatus;

/*
 * mc_inflate_start: begin inflating the zlib stream src[0..len) into a
 * buffer the caller grows up to bound bytes (it refuses a value that fills
 * that many).  src must stay in place until the stream is done.  Returns
 * MC_Z_DONE (ready) or MC_Z_NOMEM.
 * mc_inflate_more: inflate on into dst[*produced..cap), adding to
 * *produced.  dst may move between calls (zlib keeps its own window), so
 * the caller may grow its buffer with realloc and call again with the new
 * address.  Returns DONE, FULL (grow and call again), CORRUPT or
 * TRUNCATED.  While the buffer is under bound, a FULL may have kept
 * nothing (*produced unchanged): the next call starts the value over in
 * the larger buffer, in one fast shot, so a caller that starts small and
 * doubles pays at most twice the value's inflating.  Only at bound does
 * FULL mean the value is larger than bound.
 */
extern McZStatus mc_inflate_start(const void *src, size_t len, size_t bound);
extern McZStatus mc_inflate_more(char *dst, size_t cap, size_t *produced);

/* Bytes mc_deflate may need for len bytes of input. */
extern size_t mc_deflate_bound(size_t len);

/*
 * Deflate's levels as libdeflate numbers them: 1 fastest, 12 smallest; 6
 * is zlib's default (Z_DEFAULT_COMPRESSION), what the clients write.
 */
#define MC_DEFLATE_MIN_LEVEL		1
#define MC_DEFLATE_MAX_LEVEL		12
#define MC_DEFLATE_DEFAULT_LEVEL	6

/*
 * mc_deflate: the zlib stream of src[0..len) at level (MC_DEFLATE_MIN_LEVEL
 * to MC_DEFLATE_MAX_LEVEL) into dst (cap >= mc_deflate_bound), its length
 * in *outlen; a level out of that range (options.c refuses one) writes
 * the default's.  The header is the one zlib writes at that level ("78 9c"
 * at 6, as Dalli, pylibmc and pymemcache write; "78 01" at 1): its level
 * bits are a hint no reader checks, so any zlib reads every level's
 * stream.  Returns MC_Z_DONE, MC_Z_NOMEM, or MC_Z_FULL if cap was too
 * small.
 */
extern McZStatus mc_deflate(const void *src, size_t len, int level, char *dst,
							size_t cap, size_t *outlen);

/*
 * mc_compress_release: free the process's libdeflate and zlib state.  A
 * backend keeps it until exit; this is for programs checked for leaks
 * (libdeflate's compressor is aligned inside its block, so a leak checker
 * sees only an interior pointer to it).  Anything may be called after.
 */
extern void mc_compress_release(void);

#endif							/* MCFDW_COMPRESS_H */
