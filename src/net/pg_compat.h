/*
 * pg_compat.h — the PostgreSQL API differences between the majors mcfdw
 * builds against (15 to 18), in one place.
 *
 * Owns: one name per API that changed, defined for each major; nothing
 * else.  Every other file calls these names and holds no PG_VERSION_NUM
 * test of its own (rowlayout.c's guard is the one exception: it protects a
 * hand-laid tuple format, not an API).  Must not: hide a behaviour change;
 * a macro here only spells one call for every major.
 */
#ifndef MCFDW_PG_COMPAT_H
#define MCFDW_PG_COMPAT_H

#include "postgres.h"

#include "nodes/nodes.h"

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "mcfdw builds against PostgreSQL 15, 16, 17 and 18"
#endif

/* 16 moved the varlena macros out of postgres.h. */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * A function that never returns: 18 replaced pg_attribute_noreturn(),
 * written after a declaration, by pg_noreturn written before it.  mcfdw
 * builds with gcc or clang, whose attribute goes after.
 */
#if PG_VERSION_NUM >= 180000
#define McNoReturn()	__attribute__((noreturn))
#else
#define McNoReturn()	pg_attribute_noreturn()
#endif

/* 18 split EXPLAIN's state and output functions out of commands/explain.h. */
#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"
#include "commands/explain_state.h"
#endif

/*
 * What pg_stat_activity shows while a backend waits on memcached: from 17
 * on a named wait event of type Extension ("Memcached", or "MemcachedBusy"
 * between a full scan's retries of a busy dump), before it the type's
 * generic event, "Extension".  A name is registered once per backend and
 * per file that asks.
 */
#if PG_VERSION_NUM >= 170000
#include "utils/wait_event.h"

static inline uint32
McWaitEvent(bool busy)
{
	static uint32 ev[2];

	if (ev[busy] == 0)
		ev[busy] = WaitEventExtensionNew(busy ? "MemcachedBusy" : "Memcached");
	return ev[busy];
}
#else
#define McWaitEvent(busy)	PG_WAIT_EXTENSION
#endif

/* USAGE on a foreign server: 16 folded the per-kind checks into one. */
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_foreign_server.h"
#include "utils/acl.h"
#define McServerAclCheck(serverid, roleid, mode) \
	object_aclcheck(ForeignServerRelationId, (serverid), (roleid), (mode))
#else
#define McServerAclCheck(serverid, roleid, mode) \
	pg_foreign_server_aclcheck((serverid), (roleid), (mode))
#endif

/* This backend's local transaction id: 17 moved it into MyProc->vxid. */
#if PG_VERSION_NUM >= 170000
#define McMyLocalXid()	(MyProc->vxid.lxid)
#else
#define McMyLocalXid()	(MyProc->lxid)
#endif

/*
 * A wait event set that lives until FreeWaitEventSet: 17 allocates it in
 * TopMemoryContext and ties it to a resource owner (none here, as the
 * sets outlive transactions); before, it lived in the given context.
 */
#if PG_VERSION_NUM >= 170000
#define McCreateWaitEventSet(cxt, nevents)	CreateWaitEventSet(NULL, (nevents))
#else
#define McCreateWaitEventSet(cxt, nevents)	CreateWaitEventSet((cxt), (nevents))
#endif

/* 17 passes the planner to estimate_array_length. */
#if PG_VERSION_NUM >= 170000
#define McEstimateArrayLength(root, arr)	estimate_array_length((root), (arr))
#else
#define McEstimateArrayLength(root, arr)	estimate_array_length((arr))
#endif

/*
 * A foreign scan path: 17 added the restriction clauses an outer plan
 * rechecks (none here), 18 the count of disabled nodes (none: mcfdw's
 * last-resort paths are priced with disable_cost, which 18 still has).
 */
#if PG_VERSION_NUM >= 180000
#define McForeignScanPath(root, rel, rows, startup, total, required_outer) \
	create_foreignscan_path((root), (rel), NULL, (rows), 0, (startup), (total), \
							NIL, (required_outer), NULL, NIL, NIL)
#elif PG_VERSION_NUM >= 170000
#define McForeignScanPath(root, rel, rows, startup, total, required_outer) \
	create_foreignscan_path((root), (rel), NULL, (rows), (startup), (total), \
							NIL, (required_outer), NULL, NIL, NIL)
#else
#define McForeignScanPath(root, rel, rows, startup, total, required_outer) \
	create_foreignscan_path((root), (rel), NULL, (rows), (startup), (total), \
							NIL, (required_outer), NULL, NIL)
#endif

/*
 * The columns an UPDATE of result relation rti assigns: 16 moved the
 * permission fields of range table entries into RTEPermissionInfo, which
 * an inheritance child or partition has none of; the planner collects
 * them for its relation.
 */
#if PG_VERSION_NUM >= 160000
#include "optimizer/inherit.h"
#include "optimizer/pathnode.h"
#define McUpdatedCols(root, rti, rte) \
	get_rel_all_updated_cols((root), find_base_rel((root), (rti)))
#else
#define McUpdatedCols(root, rti, rte)	((rte)->updatedCols)
#endif

/*
 * A composite datum's tuple header, detoasted (an expanded record
 * flattened).  17.12 turned the DatumGetHeapTupleHeader macro into a
 * function that earlier 17.x servers do not export; the detoasting cast is
 * what the macro was in every release, so an extension built against any
 * minor release loads into all of them.
 */
#define McDatumGetTupleHeader(d)	((HeapTupleHeader) PG_DETOAST_DATUM(d))

/*
 * Outer joins and the Vars above them.  From 16 on, a Var read above an
 * outer join that can null it names that join in varnullingrels, and
 * setrefs.c checks that every reference to a join's scan tuple agrees.  A
 * custom LEFT join that NULL-extends its inner side itself states it: its
 * inner columns, and the clauses it evaluates on them, are marked as
 * nulled by the join (McNulledBy).  Before 16 there is nothing to mark.
 */
#if PG_VERSION_NUM >= 160000
#include "nodes/nodeFuncs.h"

#define McOuterJoinRelid(extra) \
	((extra)->sjinfo != NULL ? (int) (extra)->sjinfo->ojrelid : 0)

typedef struct McNulledContext
{
	Index		relid;
	int			ojrelid;
} McNulledContext;

static inline Node *
mc_nulled_mutator(Node *node, McNulledContext *cx)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var) && ((Var *) node)->varno == (int) cx->relid &&
		((Var *) node)->varlevelsup == 0)
	{
		Var		   *v = (Var *) copyObject(node);

		v->varnullingrels = bms_add_member(v->varnullingrels, cx->ojrelid);
		return (Node *) v;
	}
	return expression_tree_mutator(node, mc_nulled_mutator, cx);
}

static inline Node *
McNulledBy(Node *node, Index relid, int ojrelid)
{
	McNulledContext cx = {relid, ojrelid};

	return ojrelid > 0 ? mc_nulled_mutator(node, &cx) : node;
}
#else
#define McOuterJoinRelid(extra)		0

static inline Node *
McNulledBy(Node *node, Index relid, int ojrelid)
{
	return node;
}
#endif

/* 16 replaced pg_class_ownercheck by object_ownercheck. */
#if PG_VERSION_NUM >= 160000
#define McClassOwnercheck(relid, role) \
	object_ownercheck(RelationRelationId, (relid), (role))
#else
#define McClassOwnercheck(relid, role)	pg_class_ownercheck((relid), (role))
#endif

/*
 * A decoded change's tuple (wal_decode.c): 17 made
 * ReorderBufferChange's tuples plain HeapTuples; before, a
 * ReorderBufferTupleBuf holding one.  17 also gave ReplicationSlotCleanup
 * a flag (false: every temporary slot of this backend, as before).
 */
#if PG_VERSION_NUM >= 170000
#define McChangeTuple(t)			(t)
#define McReplicationSlotCleanup()	ReplicationSlotCleanup(false)
#else
#define McChangeTuple(t)			(&(t)->tuple)
#define McReplicationSlotCleanup()	ReplicationSlotCleanup()
#endif

/*
 * Taking a replication slot (wal_worker.c): 18 added whether an
 * invalidated slot is an error (it is, as the SQL functions have it).
 */
#if PG_VERSION_NUM >= 180000
#define McReplicationSlotAcquire(name)	ReplicationSlotAcquire((name), true, true)
#else
#define McReplicationSlotAcquire(name)	ReplicationSlotAcquire((name), true)
#endif

#endif							/* MCFDW_PG_COMPAT_H */
