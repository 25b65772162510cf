/*
 * keytmpl.h — key templates ('user:{id}'), parsed and built by keytmpl.c.
 *
 * The one parser of the template syntax, shared by the mc_invalidate
 * trigger (trigger.c) and the write-ahead log's watches (wal_sql.c checks a
 * watch's templates, wal_decode.c builds its keys).  {column} is the
 * column's text output, {{ and }} are literal braces; a row whose column is
 * NULL gives no key.  Parsing never raises: the caller words the error for
 * its own object (a trigger, a watch).
 */
#ifndef MCFDW_KEYTMPL_H
#define MCFDW_KEYTMPL_H

#include "access/tupdesc.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/stringinfo.h"

/* A literal run (attnum 0) or a column reference. */
typedef struct McTmplPart
{
	AttrNumber	attnum;
	const char *lit;
	int			litlen;
} McTmplPart;

typedef struct McKeyTmpl
{
	const char *server;			/* NULL = mcfdw.server (triggers) */
	int			nparts;
	McTmplPart *parts;
} McKeyTmpl;

/*
 * Parse text into t (allocated in the current memory context), its columns
 * resolved against desc.  False on failure: *why is the detail of a
 * malformed template, or NULL and *badcol the name of a column desc lacks.
 */
extern bool McKeyTmplParse(McKeyTmpl *t, const char *text, TupleDesc desc,
						   const char **why, char **badcol);

/* "id, email, name": the columns of desc, for a hint. */
extern char *McKeyTmplColumns(TupleDesc desc);

/*
 * Set up out[attnum - 1] (desc->natts entries, zeroed or set up before) for
 * each column t refers to.
 */
extern void McKeyTmplOutputs(const McKeyTmpl *t, TupleDesc desc, FmgrInfo *out,
							 MemoryContext cxt);

/* Build t's key for the row in slot into buf; false when a column is NULL. */
extern bool McKeyTmplBuild(const McKeyTmpl *t, TupleTableSlot *slot, FmgrInfo *out,
						   StringInfo buf);

#endif							/* MCFDW_KEYTMPL_H */
