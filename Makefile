# mcfdw — memcached for PostgreSQL 15, 16, 17 and 18.
#
#   make run          install what is missing, build, install, start a private
#                     memcached + PostgreSQL, open psql (or run the demo)
#   make test         the same set-up with four memcacheds, then every suite;
#                     TESTS=unit,scripts,regress,integration or file paths;
#                     builds with -Werror, and installs and tests the build
#                     with Asserts compiled in (ASSERTS=1)
#   make test PG=17   the pg_regress and integration suites against
#                     PostgreSQL 17 (or 16, 18), fetched by test/rig/majors.sh
#   make unit         build and run the C unit tests only (no servers)
#   make deps         install the missing Debian packages (test/rig/packages.txt)
#   make deb          the Debian package postgresql-15-mcfdw (debian/) in dist/
#   make deb-check    build it, lintian, install it into the system's
#                     PostgreSQL 15 and use it, remove it (CI, after make test)
#   make deb-check PG=17   the same for postgresql-17-mcfdw (or 18) in a root
#                     of the Debian suite that packages it (test/rig/debroot.sh)
#   make / make install / make installcheck   the usual PGXS targets
#                     (WERROR=1: warnings are errors; ASSERTS=1: the
#                     extension's Asserts are compiled in)
#
# run/test/unit/deps work before PostgreSQL's development files exist: they
# install them first and then call $(MAKE) again for the PGXS part.

# pg_regress tests (sql/NAME.sql, expected/NAME.out), in the order they run.
REGRESS_TESTS = setup get set delete bytea keys long_keys options secure_options privileges cancel errors counters invalidation multi_get ring slab_stats server_stats on_commit invalidate_trigger batch_write gat on_failure alert_counters compression lease meta foreign_table foreign_table_scan foreign_join foreign_fullscan foreign_paths_write upgrade foreign_paths_read comments connections read_only first_contact route unix_socket sqlsmith_found slab_calcification prefetch wal_watch client_stats multi_get_calls multi_get_order client_stats_off

MODULE_big = mcfdw
# src/ holds one folder per layer, top to bottom; a file includes and calls
# only its own folder and the folders below it (test/unit/structure.py
# checks).  Headers are found by name through one -I per folder.
LAYERS = sql fdw client net core
OBJS = $(patsubst %.c,%.o,$(sort $(foreach d,$(LAYERS),$(wildcard src/$(d)/*.c))))
PG_CPPFLAGS += $(foreach d,$(LAYERS),-Isrc/$(d))
# Header dependencies from the compiler: each object's list of the headers
# it included (src/LAYER/x.d), read back on the next build.  PG_CFLAGS, not
# PG_CPPFLAGS: the bitcode rule (.bc) would write the same file.
PG_CFLAGS += -MMD -MP
-include $(wildcard $(OBJS:.o=.d))

# getaddrinfo_a (conn.c's host-name lookups) is in libanl before glibc 2.34,
# in libc since (libanl is then an empty stub that --as-needed drops).
SHLIB_LINK += -lanl
# TLS: the system's OpenSSL, the one PostgreSQL itself links.
SHLIB_LINK += -lssl -lcrypto
# zlib: values compressed by Dalli, pylibmc and pymemcache (compress.c);
# libdeflate inflates and deflates the same zlib streams faster.
SHLIB_LINK += -lz -ldeflate

EXTENSION = mcfdw
DATA = mcfdw--1.0.sql mcfdw--1.0--1.1.sql mcfdw--1.1--1.2.sql mcfdw--1.2.sql
PGFILEDESC = "mcfdw - memcached for SQL"

REGRESS = $(REGRESS_TESTS)
# UTF8 database, C collation: the same answers on every machine.
REGRESS_OPTS = --encoding=UTF8 --no-locale

# -Wno-unused-parameter: PostgreSQL 15's own headers (ilist.h, bufpage.h,
# fmgr.h's PG_FUNCTION_ARGS) trip -Wextra's unused-parameter with gcc 12 and
# clang 14; no other -Wextra warning comes from them.
PG_CPPFLAGS += -Wall -Wextra -Wno-unused-parameter
# -Werror is for CI (`make test` sets it): a user's `make install` with a
# newer compiler that warns about something new must still build.
ifeq ($(WERROR),1)
PG_CPPFLAGS += -Werror
endif
# ASSERTS=1 compiles the extension's own Assert()s.  Debian's server is built
# without --enable-cassert; an extension built with USE_ASSERT_CHECKING still
# loads into it as long as it calls none of the server's cassert-only
# functions (the server loads libraries with RTLD_NOW, so a call to one
# fails at CREATE EXTENSION, not later).
ifeq ($(ASSERTS),1)
PG_CPPFLAGS += -DUSE_ASSERT_CHECKING
endif

# The objects remember the flags and the PostgreSQL they were built with:
# switching between `make test` (WERROR=1 ASSERTS=1) and a plain `make
# install`, or between majors (PG=17), rebuilds them, so an assert-enabled
# object is never installed by a plain build, nor one major's in another.
BUILD_FLAGS = .build-flags
$(OBJS) $(OBJS:.o=.bc): $(BUILD_FLAGS)
.PHONY: build-flags-check
$(BUILD_FLAGS): build-flags-check
	@echo '$(PG_CPPFLAGS) $(PG_CONFIG)' | cmp -s - $@ || echo '$(PG_CPPFLAGS) $(PG_CONFIG)' > $@

EXTRA_CLEAN = test/unit/bin $(BUILD_FLAGS) $(OBJS:.o=.d)

# Debian's PostgreSQL 15 unless PG_CONFIG is given.
PG_CONFIG_DEFAULT = /usr/lib/postgresql/15/bin/pg_config
PG_CONFIG ?= $(if $(wildcard $(PG_CONFIG_DEFAULT)),$(PG_CONFIG_DEFAULT),pg_config)

# PG=16, PG=17 or PG=18: another major, fetched once into a
# cache outside the tree by test/rig/majors.sh, whose pg_config the build,
# the install and the rig then use.  `make test PG=17` runs the pg_regress
# and integration suites against it (the C unit tests and the fuzzer do not
# depend on the server).
ifneq ($(filter-out 15,$(PG)),)
override PG_CONFIG := $(shell test/rig/majors.sh $(PG))
ifeq ($(PG_CONFIG),)
$(error test/rig/majors.sh could not provide PostgreSQL $(PG))
endif
TESTS ?= regress,integration
export PG_CONFIG
# The Unix-socket pass (test/rig/test.sh) runs with PostgreSQL 15 only: the
# transport is the same code on every major, and CI's time is not.
MCFDW_SOCKET_PASS ?= 0
export MCFDW_SOCKET_PASS
endif

# PGXS only once postgresql-server-dev-15 is there (pg_config alone comes
# with the client package; pgxs.mk does not).
PGXS := $(wildcard $(shell $(PG_CONFIG) --pgxs 2>/dev/null))

.DEFAULT_GOAL := all

ifneq ($(PGXS),)
include $(PGXS)

# Install scripts of an earlier build that this tree no longer ships would
# still be found by CREATE EXTENSION (a full-version script shadows the
# update path): remove mcfdw's installed scripts before installing.
install: remove-installed-scripts
.PHONY: remove-installed-scripts
remove-installed-scripts:
	rm -f '$(DESTDIR)$(datadir)/$(datamoduledir)'/mcfdw--*.sql
else
all install installcheck:
	@echo "PGXS not found ($(PG_CONFIG) --pgxs): run 'make deps' as root," \
	      "or set PG_CONFIG to a PostgreSQL 15 pg_config" >&2
	@exit 1
endif

# ---- C unit tests -------------------------------------------------------
# Each test/unit/test_X.c is one TAP program, linked with the pure modules
# (no PostgreSQL headers) that exist so far.
UNIT_PURE = $(wildcard src/core/*.c)
UNIT_SRCS = $(wildcard test/unit/test_*.c)
UNIT_BINS = $(patsubst test/unit/%.c,test/unit/bin/%,$(UNIT_SRCS))
UNIT_CC ?= cc
# -Wno-unused-function: tap.h defines plain static functions, and a test
# that calls only some of them would not build otherwise.
UNIT_CFLAGS ?= -O2 -g -Wall -Wextra -Werror -Wno-unused-function
UNIT_LDLIBS ?= -lz -ldeflate

test/unit/bin/%: test/unit/%.c $(UNIT_PURE) $(wildcard src/core/*.h) test/unit/tap.h
	@mkdir -p $(@D)
	$(UNIT_CC) $(UNIT_CFLAGS) -Isrc/core -Itest/unit -o $@ $< $(UNIT_PURE) $(UNIT_LDLIBS)

.PHONY: unit-build
unit-build: $(UNIT_BINS)

# ---- the rig ------------------------------------------------------------
# Environment handed to test/rig/*.sh (PG_CONFIG, TESTS and the MCFDW_*
# knobs reach them through the environment when the user sets them).
RIG_ENV = MAKE='$(MAKE)' \
	MCFDW_REGRESS='$(REGRESS)' MCFDW_REGRESS_OPTS='$(REGRESS_OPTS)' \
	MCFDW_TESTS='$(TESTS)'

.PHONY: deps run test unit

deps:
	@test/rig/deps.sh

# The build runs in a new make: this one may have started before PGXS was
# installed.  PGXS's install builds first.
run: deps
	@$(MAKE) --no-print-directory install
	@$(RIG_ENV) test/rig/run.sh

# test.sh builds first (MCFDW_BUILD=1): the release build with -Werror, then
# the assert-enabled build, which it installs and runs every suite against.
test: deps
	@$(RIG_ENV) MCFDW_BUILD=1 test/rig/test.sh

unit: deps
	@$(RIG_ENV) MCFDW_TESTS=unit test/rig/test.sh

# `make sqlsmith QUERIES=200000 [SEED=n]`: test/integration/sqlsmith_crash.py
# (random SQL from SQLsmith, no backend may crash) for many more queries than
# the 10000 of `make test`, on the same rig and assert-enabled build; its time
# limit grows with QUERIES.  See docs/testing.md, "Random SQL".
QUERIES ?= 100000
.PHONY: sqlsmith
sqlsmith: deps
	@$(RIG_ENV) MCFDW_BUILD=1 MCFDW_TESTS=test/integration/sqlsmith_crash.py \
	MCFDW_SQLSMITH_QUERIES='$(QUERIES)' $(if $(SEED),MCFDW_SQLSMITH_SEED='$(SEED)') \
	MCFDW_LIMIT_INTEGRATION=$$(( $(QUERIES) / 20 + 300 )) test/rig/test.sh

# `make bench` (test/bench/): the same kind of rig as `make test`, plus
# pgmemcache; mcfdw side by side with pgmemcache and a raw C client, one
# table at the end, the CSV in test/bench/results/.  Not part of `make test`.
# BENCH_QUICK=1 for fewer, shorter rounds (about 3 minutes instead of 10).
.PHONY: bench
bench: deps
	@$(MAKE) --no-print-directory install
	@$(RIG_ENV) BENCH_QUICK='$(BENCH_QUICK)' test/bench/bench.sh

# `make deb` (test/rig/deb.sh): the source package and postgresql-15-mcfdw's
# .deb in dist/, built by dpkg-buildpackage (pg_buildext) from a copy of the
# tree.  `make deb-check` builds it, runs lintian, installs it with dpkg -i
# into Debian's PostgreSQL 15 (the system's, whatever PG_CONFIG says; root),
# creates the extension in a fresh cluster and uses it against a private
# memcached, then removes it and puts back what a `make install` had put
# there; TAP lines and "N passed, N failed".  .ci/run runs it after make test.
# With PG=17 or PG=18, postgresql-17-mcfdw (or -18) in dist/pg17 (pg18),
# built, linted, installed and used in a root of trixie (sid), made once by
# test/rig/debroot.sh; Debian packages no PostgreSQL 16, so there is none.
.PHONY: deb deb-check
deb: deps
	@test/rig/deb.sh build $(PG)

deb-check: deps
	@test/rig/deb.sh check $(PG)
