/*
 * keytmpl.c — key templates ('user:{id}'): the one parser of their syntax
 * and the key builder (keytmpl.h says the syntax).
 *
 * Owns: parsing a template against a relation's columns, the output
 * functions its columns need, and building a row's key from them.  Shared
 * by the mc_invalidate trigger (trigger.c) and the write-ahead log's
 * watches (wal_sql.c checks a watch's templates, wal_decode.c builds its
 * keys).  Must not: raise for a malformed template (the caller words the
 * error for its own object, a trigger or a watch) or check keys (the
 * senders check them as mc_delete would).
 */
#include "postgres.h"

#include "access/tupdesc.h"
#include "executor/tuptable.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "keytmpl.h"
#include "pg_compat.h"

/* "id, email, name": the hint of an unknown column. */
char *
McKeyTmplColumns(TupleDesc desc)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (s.len > 0)
			appendStringInfoString(&s, ", ");
		appendStringInfoString(&s, NameStr(att->attname));
	}
	return s.data;
}

/* The attnum of column col of desc, or InvalidAttrNumber. */
static AttrNumber
template_column(TupleDesc desc, const char *col)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), col) == 0)
			return att->attnum;
	}
	return InvalidAttrNumber;
}

bool
McKeyTmplParse(McKeyTmpl *t, const char *text, TupleDesc desc,
			   const char **why, char **badcol)
{
	StringInfoData lit;
	const char *p = text;

	*why = NULL;
	*badcol = NULL;
	t->parts = palloc(sizeof(McTmplPart) * (strlen(text) + 1));
	t->nparts = 0;
	initStringInfo(&lit);
	for (;;)
	{
		if (*p == '\0' || (*p == '{' && p[1] != '{'))
		{
			/* end of a literal run */
			if (lit.len > 0)
			{
				McTmplPart *part = &t->parts[t->nparts++];

				part->attnum = 0;
				part->lit = pnstrdup(lit.data, lit.len);
				part->litlen = lit.len;
				resetStringInfo(&lit);
			}
			if (*p == '\0')
				break;
		}
		if (p[0] == '{' && p[1] == '{')
		{
			appendStringInfoChar(&lit, '{');
			p += 2;
		}
		else if (p[0] == '}' && p[1] == '}')
		{
			appendStringInfoChar(&lit, '}');
			p += 2;
		}
		else if (*p == '}')
		{
			*why = "A \"}\" closes no column reference.";
			return false;
		}
		else if (*p == '{')
		{
			const char *end = strchr(p + 1, '}');
			McTmplPart *part;
			char	   *col;

			if (end == NULL)
			{
				*why = "A \"{\" is not closed.";
				return false;
			}
			if (end == p + 1 || memchr(p + 1, '{', end - p - 1) != NULL)
			{
				*why = "A column reference must name a column.";
				return false;
			}
			col = pnstrdup(p + 1, end - p - 1);
			part = &t->parts[t->nparts++];
			part->attnum = template_column(desc, col);
			if (part->attnum == InvalidAttrNumber)
			{
				*badcol = col;
				return false;
			}
			part->lit = NULL;
			part->litlen = 0;
			p = end + 1;
		}
		else
			appendStringInfoChar(&lit, *p++);
	}
	if (t->nparts == 0)
	{
		*why = "A key cannot be empty.";
		return false;
	}
	return true;
}

void
McKeyTmplOutputs(const McKeyTmpl *t, TupleDesc desc, FmgrInfo *out, MemoryContext cxt)
{
	for (int i = 0; i < t->nparts; i++)
	{
		AttrNumber	a = t->parts[i].attnum;
		Oid			func;
		bool		varlena;

		if (a == 0 || OidIsValid(out[a - 1].fn_oid))
			continue;
		getTypeOutputInfo(TupleDescAttr(desc, a - 1)->atttypid, &func, &varlena);
		fmgr_info_cxt(func, &out[a - 1], cxt);
	}
}

/*
 * Append a column's text output.  The common key types are written here
 * with the same functions their output functions call, rather than
 * through a call that allocates the text (a key per row changed, for the
 * write-ahead log's decoder): the bytes are the same.
 */
static inline void
append_value(StringInfo buf, FmgrInfo *out, Datum d)
{
	char		num[MAXINT8LEN + 1];

	switch (out->fn_oid)
	{
		case F_INT4OUT:
			appendBinaryStringInfo(buf, num, pg_ltoa(DatumGetInt32(d), num));
			return;
		case F_INT8OUT:
			appendBinaryStringInfo(buf, num, pg_lltoa(DatumGetInt64(d), num));
			return;
		case F_INT2OUT:
			appendBinaryStringInfo(buf, num, pg_itoa(DatumGetInt16(d), num));
			return;
		case F_TEXTOUT:
		case F_VARCHAROUT:
			/* in line and not compressed: its bytes, whatever the header */
			if (!VARATT_IS_EXTERNAL(DatumGetPointer(d)) &&
				!VARATT_IS_COMPRESSED(DatumGetPointer(d)))
			{
				appendBinaryStringInfo(buf, VARDATA_ANY(DatumGetPointer(d)),
									   VARSIZE_ANY_EXHDR(DatumGetPointer(d)));
				return;
			}
			break;
	}
	appendStringInfoString(buf, OutputFunctionCall(out, d));
}

bool
McKeyTmplBuild(const McKeyTmpl *t, TupleTableSlot *slot, FmgrInfo *out, StringInfo buf)
{
	resetStringInfo(buf);
	for (int i = 0; i < t->nparts; i++)
	{
		McTmplPart *part = &t->parts[i];
		Datum		d;
		bool		isnull;

		if (part->attnum == 0)
		{
			appendBinaryStringInfo(buf, part->lit, part->litlen);
			continue;
		}
		d = slot_getattr(slot, part->attnum, &isnull);
		if (isnull)
			return false;
		append_value(buf, &out[part->attnum - 1], d);
	}
	return true;
}
