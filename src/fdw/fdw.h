/*
 * fdw.h — what the foreign-table files share: fdw.c (handler, planning),
 * fdw_scan.c (the scan and its EXPLAIN), fdw_modify.c (INSERT, UPDATE,
 * DELETE), fdw_table.c (a table's columns and options, value conversions).
 * The table and column options are client.h's (options.c parses them).
 *
 * A foreign table's key prefix goes after the server's: a key k of a table
 * with key_prefix 'user:' on a server with key_prefix 'app:' is the item
 * "app:user:k".  Tables of one server so share its namespace and keep their
 * own within it.
 */
#ifndef MCFDW_FDW_H
#define MCFDW_FDW_H

#include "client.h"
#include "run.h"

#include "foreign/fdwapi.h"
#include "utils/rel.h"

/*
 * Planner costs (fdw.c, fdw_join.c): a round trip to memcached, in planner
 * cost units (about 10 us each), and one key of a pipelined batch
 * (encoding, parsing, the row).
 */
#define MC_ROUNDTRIP_COST	10.0
#define MC_KEY_COST			0.02

/*
 * A foreign table as the wrapper reads it: options, and which attribute
 * holds which field (0: none), with the types that decide conversions.
 */
typedef struct McTable
{
	Oid			relid;
	Oid			serverid;
	McTableOptions opts;
	AttrNumber	attnum[MC_NFIELDS];
	Oid			atttype[MC_NFIELDS];
} McTable;

/* How the value column's type is read and written. */
typedef enum McColumnKind
{
	MC_VALUE_TEXT,				/* text, varchar: the bytes, valid in the encoding */
	MC_VALUE_BYTEA,				/* the bytes as they are */
	MC_VALUE_IO					/* any other type: its input/output functions */
} McColumnKind;

/* The meta flags a field is read with. */
static inline unsigned
McFieldWant(McField f)
{
	switch (f)
	{
		case MC_FIELD_VALUE:
			return MC_F_VALUE;
		case MC_FIELD_FLAGS:
			return MC_F_FLAGS;
		case MC_FIELD_CAS:
			return MC_F_CAS;
		case MC_FIELD_TTL:
			return MC_F_TTL;
		default:
			return 0;
	}
}

/* What a key condition's expression gives: one key, or an array of them. */
#define MC_KEYEXPR_SCALAR	0
#define MC_KEYEXPR_ARRAY	1

/*
 * A plan's fdw_private: the fields to ask for, the kind of each key
 * expression, and for a full scan (no key condition) a third element.
 */
#define MC_PRIVATE_FULLSCAN	2

/* A value column's conversions, set up once per scan or modification. */
typedef struct McColumnIO
{
	McColumnKind kind;
	Oid			type;
	int32		typmod;
	FmgrInfo	in;				/* MC_VALUE_IO */
	Oid			ioparam;
	FmgrInfo	out;
} McColumnIO;

/* fdw_table.c */
extern void McTableColumnIOInit(McColumnIO *io, Oid type, int32 typmod);
extern unsigned McTableColumnFields(McServer *srv, const McColumnIO *io, unsigned want);
extern void McTableColumnCheck(const McColumnIO *io, McServer *srv, const McReply *r,
						  const char *v, size_t len, const char *key, size_t keylen);
extern Datum McTableColumnRead(McColumnIO *io, McServer *srv, const McReply *r, char *v,
						  size_t len, const char *key, size_t keylen);
extern const char *McTableColumnWrite(McColumnIO *io, Datum d, size_t *len);
extern void McTableLoad(Relation rel, McTable *t);
extern McColumnKind McTableColumnKindOf(Oid type);
extern Datum McTableKeyWithPrefix(const McTable *t, Datum key);
extern Datum McTableKeyWithoutPrefix(const McTable *t, Datum key);
extern void McTableRowFromReply(const McTable *t, McColumnIO *vio, McServer *srv,
						   Datum given, char *base, const McReply *r,
						   Datum *values, bool *nulls, int natts);

/* fdw.c: what the batched join's planning (fdw_join.c) reads of a scan's */
extern bool McFdwPlannedTable(RelOptInfo *rel, const McTable **t, unsigned *want);
extern double McFdwKeyCondition(PlannerInfo *root, Node *clause, Index relid,
							 AttrNumber keyatt, List **exprs, List **kinds);

/* fdw_join.c, fdw_join_exec.c: the batched join; its first batch's outer rows */
#define MC_JOIN_FIRST_BATCH	64
extern void McFdwJoinInit(void);
extern const struct CustomScanMethods McJoinScanMethods;

/* fdw_scan.c: the scan's callbacks */
extern void McBeginForeignScan(ForeignScanState *node, int eflags);
extern TupleTableSlot *McIterateForeignScan(ForeignScanState *node);
extern void McReScanForeignScan(ForeignScanState *node);
extern void McEndForeignScan(ForeignScanState *node);
extern void McExplainForeignScan(ForeignScanState *node, struct ExplainState *es);
extern const char *McFdwScanFieldsText(unsigned want);
extern bool McAnalyzeForeignTable(Relation rel, AcquireSampleRowsFunc *func,
								  BlockNumber *totalpages);

/* fdw_fullscan.c: a scan with no key condition, and item counts for planning */
typedef struct McFullScan McFullScan;
extern McFullScan *McFullScanBegin(const McTable *t);
extern bool McFullScanNext(McFullScan *fs, McServer *srv, unsigned want,
						   McRunHitFn fn, void *arg);
extern void McFullScanRewind(McFullScan *fs);
extern void McFullScanEnd(McFullScan *fs);
extern void McFullScanExplain(McFullScan *fs, struct ExplainState *es);
extern double McFullScanSample(McFullScan *fs, McServer *srv, int n, unsigned want,
							   McRunHitFn fn, void *arg, int *nsampled);
extern double McFullScanItems(Oid serverid);

/* fdw_modify.c: the modification callbacks */
extern void McAddForeignUpdateTargets(PlannerInfo *root, Index rtindex,
									  RangeTblEntry *target_rte,
									  Relation target_relation);
extern List *McPlanForeignModify(PlannerInfo *root, ModifyTable *plan,
								 Index resultRelation, int subplan_index);
extern void McBeginForeignModify(ModifyTableState *mtstate,
								 ResultRelInfo *rinfo, List *fdw_private,
								 int subplan_index, int eflags);
extern TupleTableSlot *McExecForeignInsert(EState *estate, ResultRelInfo *rinfo,
										   TupleTableSlot *slot,
										   TupleTableSlot *planSlot);
extern TupleTableSlot **McExecForeignBatchInsert(EState *estate,
												 ResultRelInfo *rinfo,
												 TupleTableSlot **slots,
												 TupleTableSlot **planSlots,
												 int *numSlots);
extern int	McGetForeignModifyBatchSize(ResultRelInfo *rinfo);
extern TupleTableSlot *McExecForeignUpdate(EState *estate, ResultRelInfo *rinfo,
										   TupleTableSlot *slot,
										   TupleTableSlot *planSlot);
extern TupleTableSlot *McExecForeignDelete(EState *estate, ResultRelInfo *rinfo,
										   TupleTableSlot *slot,
										   TupleTableSlot *planSlot);
extern void McExplainForeignModify(ModifyTableState *mtstate,
								   ResultRelInfo *rinfo, List *fdw_private,
								   int subplan_index, struct ExplainState *es);
extern void McEndForeignModify(EState *estate, ResultRelInfo *rinfo);
extern void McBeginForeignInsert(ModifyTableState *mtstate,
								 ResultRelInfo *rinfo);
extern void McEndForeignInsert(EState *estate, ResultRelInfo *rinfo);
extern int	McIsForeignRelUpdatable(Relation rel);

#endif							/* MCFDW_FDW_H */
