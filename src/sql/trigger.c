/*
 * trigger.c — mc_invalidate, the trigger that deletes a row's cache keys
 * once the transaction commits.
 *
 * Owns: the key templates of a trigger (parsed by keytmpl.c at its first
 * firing in a statement and cached in fn_extra, so a row costs no
 * parsing), building a row's keys from OLD and NEW (row triggers) or from
 * the transition tables (statement triggers), and handing them to the
 * on-commit queue; and mc_check_trigger, the event trigger that refuses an
 * mc_invalidate trigger on TRUNCATE when it is created.  Must not: send
 * anything (xact.c does, after commit) or check keys itself (the queue
 * checks them as mc_delete would).
 *
 * Arguments, in order:
 *   'user:{id}'    a key template: {column} is the column's text output,
 *                  {{ and }} are literal braces; a row whose column is NULL
 *                  gives no key for that template.
 *   '@name'        the foreign server of the templates after it ('@' alone:
 *                  back to mcfdw.server, the default); a template that
 *                  starts with a literal '@' is written '@@...'.
 */
#include "postgres.h"

#include "access/tupdesc.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "parser/parse_func.h"
#include "utils/syscache.h"
#include "executor/tuptable.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

#include "keytmpl.h"
#include "xact.h"

PG_FUNCTION_INFO_V1(mc_invalidate);
PG_FUNCTION_INFO_V1(mc_check_trigger);

/* A trigger's parsed arguments, in fn_extra for the statement. */
typedef struct TrigCache
{
	Oid			tgoid;
	int			ntmpl;
	McKeyTmpl    *tmpl;
	FmgrInfo   *out;			/* output function per attribute (attnum - 1) */
	MemoryContext rowcxt;		/* column outputs of one row */
	StringInfoData oldkey;
	StringInfoData newkey;
} TrigCache;

/* Error for a template that is not well formed. */
static void
bad_template(Trigger *trig, const char *arg, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid key template \"%s\" of trigger \"%s\"", arg, trig->tgname),
			 errdetail("%s", why),
			 errhint("Write {column} for a column's value, {{ and }} for literal braces.")));
}

/* Parse one template (arg, without an escaping '@') into t. */
static void
parse_template(TrigCache *c, McKeyTmpl *t, Relation rel, Trigger *trig,
			   const char *arg, const char *text, MemoryContext cxt)
{
	const char *why;
	char	   *col;

	if (McKeyTmplParse(t, text, RelationGetDescr(rel), &why, &col))
	{
		McKeyTmplOutputs(t, RelationGetDescr(rel), c->out, cxt);
		return;
	}
	if (why != NULL)
		bad_template(trig, arg, why);
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("column \"%s\" of relation \"%s\" does not exist",
					col, RelationGetRelationName(rel)),
			 errdetail("Key template \"%s\" of trigger \"%s\" refers to it.",
					   arg, trig->tgname),
			 errhint("The columns of \"%s\" are: %s.",
					 RelationGetRelationName(rel), McKeyTmplColumns(RelationGetDescr(rel)))));
}

/* The trigger's parsed arguments, from fn_extra or parsed now. */
static TrigCache *
trigger_cache(FunctionCallInfo fcinfo, TriggerData *td)
{
	TrigCache  *c = (TrigCache *) fcinfo->flinfo->fn_extra;
	Trigger    *trig = td->tg_trigger;
	Relation	rel = td->tg_relation;
	MemoryContext cxt = fcinfo->flinfo->fn_mcxt;
	MemoryContext old;
	const char *server = NULL;

	if (c != NULL && c->tgoid == trig->tgoid)
		return c;
	old = MemoryContextSwitchTo(cxt);
	c = palloc0(sizeof(TrigCache));
	c->tgoid = trig->tgoid;
	c->tmpl = palloc(sizeof(McKeyTmpl) * Max(trig->tgnargs, 1));
	c->out = palloc0(sizeof(FmgrInfo) * Max(RelationGetDescr(rel)->natts, 1));
	for (int i = 0; i < trig->tgnargs; i++)
	{
		const char *arg = trig->tgargs[i];

		if (arg[0] == '@' && arg[1] != '@')
		{
			if (strlen(arg + 1) >= NAMEDATALEN)
				ereport(ERROR,
						(errcode(ERRCODE_NAME_TOO_LONG),
						 errmsg("server name \"%s\" of trigger \"%s\" is too long",
								arg + 1, trig->tgname)));
			server = arg[1] ? pstrdup(arg + 1) : NULL;
			continue;
		}
		c->tmpl[c->ntmpl].server = server;
		parse_template(c, &c->tmpl[c->ntmpl], rel, trig, arg,
					   arg[0] == '@' ? arg + 1 : arg, cxt);
		c->ntmpl++;
	}
	if (c->ntmpl == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("trigger \"%s\" gives mc_invalidate no key template", trig->tgname),
				 errhint("Pass key templates as trigger arguments, as in EXECUTE FUNCTION mc_invalidate('user:{id}').")));
	c->rowcxt = AllocSetContextCreate(cxt, "mc_invalidate row", ALLOCSET_SMALL_SIZES);
	initStringInfo(&c->oldkey);
	initStringInfo(&c->newkey);
	MemoryContextSwitchTo(old);
	fcinfo->flinfo->fn_extra = c;
	return c;
}

/* Build t's key for the row in slot into buf; false when a column is NULL. */
static bool
build_key(TrigCache *c, McKeyTmpl *t, TupleTableSlot *slot, StringInfo buf)
{
	return McKeyTmplBuild(t, slot, c->out, buf);
}

/*
 * Queue the keys of one row: OLD's, and NEW's where it differs (an UPDATE
 * that changes a key column invalidates both keys).
 */
static void
queue_row(TrigCache *c, TupleTableSlot *oldslot, TupleTableSlot *newslot)
{
	MemoryContext old = MemoryContextSwitchTo(c->rowcxt);

	for (int i = 0; i < c->ntmpl; i++)
	{
		McKeyTmpl    *t = &c->tmpl[i];
		bool		have_old = oldslot != NULL && build_key(c, t, oldslot, &c->oldkey);

		if (have_old)
			McXactQueueDelete(McServerLookup(t->server), c->oldkey.data, c->oldkey.len);
		if (newslot == NULL || !build_key(c, t, newslot, &c->newkey))
			continue;
		if (have_old && c->oldkey.len == c->newkey.len &&
			memcmp(c->oldkey.data, c->newkey.data, c->newkey.len) == 0)
			continue;
		McXactQueueDelete(McServerLookup(t->server), c->newkey.data, c->newkey.len);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(c->rowcxt);
}

/* Queue the keys of every row of a transition table. */
static void
queue_table(TrigCache *c, Tuplestorestate *ts, TupleDesc desc)
{
	TupleTableSlot *slot;

	if (ts == NULL)
		return;
	slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	tuplestore_rescan(ts);
	while (tuplestore_gettupleslot(ts, true, false, slot))
		queue_row(c, slot, NULL);
	ExecDropSingleTupleTableSlot(slot);
}

/*
 * mc_invalidate(template, ...): AFTER INSERT OR UPDATE OR DELETE, FOR EACH
 * ROW, or FOR EACH STATEMENT with REFERENCING OLD TABLE / NEW TABLE.
 */
Datum
mc_invalidate(PG_FUNCTION_ARGS)
{
	TriggerData *td;
	TrigCache  *c;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("mc_invalidate was not called by the trigger manager")));
	td = (TriggerData *) fcinfo->context;
	if (!TRIGGER_FIRED_AFTER(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must be an AFTER trigger to run mc_invalidate",
						td->tg_trigger->tgname)));
	/* refused at CREATE TRIGGER too, unless event triggers were off then */
	if (TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("mc_invalidate cannot be fired by TRUNCATE"),
				 errdetail("Trigger \"%s\" on \"%s\" runs it on TRUNCATE.",
						   td->tg_trigger->tgname, RelationGetRelationName(td->tg_relation)),
				 errhint("A truncated table has no rows to build keys from: drop the trigger or recreate it without TRUNCATE, and flush the cache when the table is truncated.")));
	c = trigger_cache(fcinfo, td);
	if (TRIGGER_FIRED_FOR_ROW(td->tg_event))
	{
		if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
			queue_row(c, NULL, td->tg_trigslot);
		else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
			queue_row(c, td->tg_trigslot, NULL);
		else
			queue_row(c, td->tg_trigslot, td->tg_newslot);
	}
	else
	{
		if (td->tg_oldtable == NULL && td->tg_newtable == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
					 errmsg("statement trigger \"%s\" has no transition tables for mc_invalidate",
							td->tg_trigger->tgname),
					 errhint("Add REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows (as the event allows), or use FOR EACH ROW.")));
		queue_table(c, td->tg_oldtable, RelationGetDescr(td->tg_relation));
		queue_table(c, td->tg_newtable, RelationGetDescr(td->tg_relation));
	}
	return PointerGetDatum(NULL);
}

/*
 * Is function fn mc_invalidate, this library's (under whatever name or
 * schema)?  Only a C function whose link symbol is mc_invalidate is looked
 * up (fmgr_info loads its library): no other library is loaded here.
 */
static bool
is_mc_invalidate(Oid fn)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	bool		ours = false;
	FmgrInfo	fi;

	if (!HeapTupleIsValid(tup))
		return false;
	if (((Form_pg_proc) GETSTRUCT(tup))->prolang == ClanguageId)
	{
		bool		isnull;
		Datum		src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);

		ours = !isnull && strcmp(TextDatumGetCString(src), "mc_invalidate") == 0;
	}
	ReleaseSysCache(tup);
	if (!ours)
		return false;
	fmgr_info(fn, &fi);
	return fi.fn_addr == mc_invalidate;
}

/*
 * mc_check_trigger(): the event trigger mcfdw_check_trigger, at the end of
 * each CREATE TRIGGER.  PostgreSQL loads no trigger function's library at
 * CREATE TRIGGER, so mc_invalidate cannot see its own creation; an event
 * trigger function is called then, and loads this library.  A trigger that
 * runs mc_invalidate on TRUNCATE is refused here (the error rolls the
 * CREATE TRIGGER back) rather than at the first TRUNCATE of the table.
 */
Datum
mc_check_trigger(PG_FUNCTION_ARGS)
{
	EventTriggerData *ev;
	CreateTrigStmt *stmt;
	Oid			fn;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("mc_check_trigger was not called by the event trigger manager")));
	ev = (EventTriggerData *) fcinfo->context;
	if (!IsA(ev->parsetree, CreateTrigStmt))
		PG_RETURN_VOID();
	stmt = (CreateTrigStmt *) ev->parsetree;
	if ((stmt->events & TRIGGER_TYPE_TRUNCATE) == 0)
		PG_RETURN_VOID();
	fn = LookupFuncName(stmt->funcname, 0, NULL, true);
	if (!OidIsValid(fn) || !is_mc_invalidate(fn))
		PG_RETURN_VOID();
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
			 errmsg("trigger \"%s\" cannot run mc_invalidate on TRUNCATE", stmt->trigname),
			 errdetail("A truncated table has no rows to build keys from."),
			 errhint("Create the trigger for INSERT, UPDATE or DELETE only, and flush the cache when the table is truncated.")));
	PG_RETURN_VOID();
}
