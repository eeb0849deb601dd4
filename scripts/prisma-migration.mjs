// Developer tool: writes the next SQL migration of each provider from the schema.
//
//   node scripts/prisma-migration.mjs <name>      write prisma/<provider>/migrations/<NNNN>_<name>/migration.sql
//   node scripts/prisma-migration.mjs --check     exit 1 (and print the SQL) when the committed
//                                                 migrations do not produce the current schema
//   options: --provider sqlite|postgresql (default: both)
//
// For each provider the Prisma schema engine (@prisma/schema-engine-wasm, driven through
// a migration-aware driver adapter) replays the committed migrations in name order on a
// scratch "shadow" database, introspects the result and diffs it against
// prisma/<provider>/schema.prisma. The SQL it prints is the new migration.
//
// SQLite needs nothing: both databases are in memory. PostgreSQL needs a server on which
// the tool may create and drop a scratch database; it is taken from
// GATEHOUSE_MIGRATION_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/postgres).
// Nothing is written to that database other than the scratch database, which is dropped.
//
// Only the developer runs this: the application applies the committed SQL itself at
// start (src/storage/migrate.ts) and ships neither the engine nor this script.
//
// @prisma/schema-engine-wasm is versioned like Prisma's engines (see `Default Engines Hash`
// in `prisma --version`), not like the CLI, and its JavaScript API is the engine's own: it
// is pinned exactly, to the build nearest the CLI's engines, and moved with a Prisma upgrade
// (this script's --check, run by the tests, says whether the new build still works).
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import pg from "pg";
import { PrismaBetterSqlite3 } from "@prisma/adapter-better-sqlite3";
import { PrismaPg } from "@prisma/adapter-pg";
import { bindMigrationAwareSqlAdapterFactory } from "@prisma/driver-adapter-utils";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const PROVIDERS = ["sqlite", "postgresql"];
const DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres";
const NO_FILTER = { externalTables: [], externalEnums: [] };

// ---------------------------------------------------------------- engine

/**
 * Loads the wasm schema engine. The package's entry point imports the .wasm file as an
 * ES module (a Node 20 flag), so the module is instantiated here by hand against its
 * JavaScript glue instead.
 */
async function loadEngineModule() {
  const gluePath = require.resolve("@prisma/schema-engine-wasm/schema_engine_bg");
  const glue = await import(gluePath);
  const bytes = readFileSync(join(dirname(gluePath), "schema_engine_bg.wasm"));
  const { instance } = await WebAssembly.instantiate(bytes, { "./schema_engine_bg.js": glue });
  glue.__wbg_set_wasm(instance.exports);
  instance.exports.__wbindgen_start();
  return glue;
}

/** Engine log lines are JSON; show them only when PRISMA_DEBUG_ENGINE is set. */
function engineLog(line) {
  if (process.env.PRISMA_DEBUG_ENGINE) process.stderr.write(`[schema-engine] ${line}\n`);
}

// ---------------------------------------------------------------- adapters

/**
 * The adapter's public methods, with some of them replaced: a wrapper by composition, so
 * the adapter object itself is left as the library made it.
 */
function delegate(adapter, overrides) {
  return {
    provider: adapter.provider,
    adapterName: adapter.adapterName,
    queryRaw: (query) => adapter.queryRaw(query),
    executeRaw: (query) => adapter.executeRaw(query),
    executeScript: (script) => adapter.executeScript(script),
    startTransaction: (isolationLevel) => adapter.startTransaction(isolationLevel),
    ...(adapter.getConnectionInfo ? { getConnectionInfo: () => adapter.getConnectionInfo() } : {}),
    dispose: () => adapter.dispose(),
    ...overrides,
  };
}

/**
 * The engine replays each migration on the shadow database with one executeRaw of the
 * whole script, which better-sqlite3's prepare() rejects ("more than one statement");
 * such a parameterless script goes through exec() instead.
 */
function acceptScripts(adapter) {
  return delegate(adapter, {
    async executeRaw(query) {
      try {
        return await adapter.executeRaw(query);
      } catch (error) {
        if (query.args.length > 0 || !/more than one statement/.test(String(error?.message))) throw error;
        await adapter.executeScript(query.sql);
        return 0;
      }
    },
  });
}

/** SQLite: the main and the shadow database are both private in-memory databases. */
function sqliteFactory() {
  const factory = new PrismaBetterSqlite3({ url: ":memory:" }, { shadowDatabaseUrl: ":memory:" });
  return {
    provider: factory.provider,
    adapterName: factory.adapterName,
    connect: async () => acceptScripts(await factory.connect()),
    connectToShadowDb: async () => acceptScripts(await factory.connectToShadowDb()),
  };
}

/**
 * pg Client that reports catalog columns of PostgreSQL's one-byte type `"char"` (OID 18,
 * e.g. pg_class.relkind) as text: @prisma/adapter-pg rejects OID 18 while the engine
 * introspects the catalog. The value itself already arrives as a one-character string.
 */
class CatalogSafeClient extends pg.Client {
  query(config, values, callback) {
    const patch = (result) => {
      for (const r of Array.isArray(result) ? result : [result]) {
        for (const field of r?.fields ?? []) if (field.dataTypeID === 18) field.dataTypeID = 25;
      }
      return result;
    };
    const cb = typeof values === "function" ? values : callback;
    if (typeof cb === "function") {
      const wrapped = (err, result) => cb(err, err ? result : patch(result));
      return typeof values === "function" ? super.query(config, wrapped) : super.query(config, values, wrapped);
    }
    const ret = super.query(config, values);
    return ret && typeof ret.then === "function" ? ret.then(patch) : ret;
  }
}

function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(database)}`;
  return u.toString();
}

/**
 * PostgreSQL: the main connection is the configured server database (only read); the
 * shadow database is a scratch database created here and dropped when the engine lets
 * go of it. (PrismaPg's own shadow connection keeps the database named in a connection
 * string, so it would replay the migrations into the main database.)
 */
function postgresFactory(url) {
  const main = new PrismaPg({ connectionString: url, Client: CatalogSafeClient });
  return {
    provider: main.provider,
    adapterName: main.adapterName,
    connect: () => main.connect(),
    async connectToShadowDb() {
      const name = `gatehouse_shadow_${randomUUID().replaceAll("-", "")}`;
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE "${name}"`);
      } finally {
        await admin.end();
      }
      const shadow = await new PrismaPg({
        connectionString: withDatabase(url, name),
        Client: CatalogSafeClient,
      }).connect();
      return delegate(shadow, {
        async dispose() {
          await shadow.dispose();
          const dropper = new pg.Client({ connectionString: url });
          await dropper.connect();
          try {
            await dropper.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
          } finally {
            await dropper.end();
          }
        },
      });
    },
  };
}

// ---------------------------------------------------------------- migrations on disk

function migrationsDir(provider) {
  return join(root, "prisma", provider, "migrations");
}

/** Committed migration folders (those holding a migration.sql), in name order. */
function committedMigrations(provider) {
  const dir = migrationsDir(provider);
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && existsSync(join(dir, e.name, "migration.sql")))
    .map((e) => e.name)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The engine's view of the migrations folder; the lock file is implied by the provider. */
function migrationList(provider) {
  const dir = migrationsDir(provider);
  return {
    baseDir: dir,
    lockfile: { path: "migration_lock.toml", content: `provider = "${provider}"\n` },
    shadowDbInitScript: "",
    migrationDirectories: committedMigrations(provider).map((name) => ({
      path: name,
      migrationFile: {
        path: "migration.sql",
        content: { tag: "ok", value: readFileSync(join(dir, name, "migration.sql"), "utf8") },
      },
    })),
  };
}

// ---------------------------------------------------------------- diff

/** SQL taking the committed migrations' end state to prisma/<provider>/schema.prisma; "" when none. */
async function diffFor(engineModule, provider) {
  const schemaPath = join(root, "prisma", provider, "schema.prisma");
  const schema = readFileSync(schemaPath, "utf8");
  const url = process.env.GATEHOUSE_MIGRATION_DATABASE_URL ?? DEFAULT_PG_URL;
  const factory = bindMigrationAwareSqlAdapterFactory(provider === "sqlite" ? sqliteFactory() : postgresFactory(url));
  const files = [{ path: schemaPath, content: schema }];
  const engine = await engineModule.SchemaEngine.new({ datamodels: [[schemaPath, schema]] }, engineLog, factory);
  try {
    const result = await engine.diff({
      from: { tag: "migrations", ...migrationList(provider) },
      to: { tag: "schemaDatamodel", files },
      script: true,
      exitCode: true,
      filters: NO_FILTER,
    });
    // exitCode 2 means "the diff is not empty"; an empty script is a comment line only.
    return result.exitCode === 2 ? (result.stdout ?? "") : "";
  } catch (error) {
    // Driver errors reach the engine as "External error id#N"; the registry holds the original.
    const id = /External error id#(\d+)/.exec(String(error?.message))?.[1];
    const cause = id === undefined ? undefined : factory.errorRegistry.consumeError(Number(id))?.error;
    if (cause) error.message += `\nCaused by: ${cause?.message ?? JSON.stringify(cause)}`;
    throw error;
  } finally {
    engine.free();
  }
}

// ---------------------------------------------------------------- main

function nextNumber(providers) {
  let max = 0;
  for (const provider of providers) {
    for (const name of committedMigrations(provider)) {
      const n = Number.parseInt(name.slice(0, name.indexOf("_")), 10);
      if (Number.isFinite(n) && n > max) max = n;
    }
  }
  return String(max + 1).padStart(4, "0");
}

function usage(message) {
  if (message) console.error(message);
  console.error("usage: node scripts/prisma-migration.mjs <name> | --check  [--provider sqlite|postgresql]");
  process.exit(2);
}

async function main(argv) {
  let check = false;
  let name;
  let providers = PROVIDERS;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--check") check = true;
    else if (arg === "--provider") {
      const p = argv[++i];
      if (!PROVIDERS.includes(p)) usage(`unknown provider: ${p}`);
      providers = [p];
    } else if (arg.startsWith("-")) usage(`unknown option: ${arg}`);
    else if (name === undefined) name = arg;
    else usage("only one migration name");
  }
  if (!check && !name) usage();
  let slug = "";
  if (!check) {
    slug = name
      .trim()
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "_")
      .replace(/^_+|_+$/g, "");
    if (!slug) usage(`not a usable migration name: ${name}`);
  }

  const engineModule = await loadEngineModule();
  const diffs = new Map();
  for (const provider of providers) diffs.set(provider, await diffFor(engineModule, provider));

  if (check) {
    let drift = false;
    for (const [provider, sql] of diffs) {
      if (!sql.trim()) {
        console.log(`${provider}: committed migrations match prisma/${provider}/schema.prisma`);
        continue;
      }
      drift = true;
      console.error(`${provider}: committed migrations do not produce prisma/${provider}/schema.prisma; missing SQL:\n`);
      console.error(sql);
    }
    if (drift) console.error("Run: node scripts/prisma-migration.mjs <name>");
    return drift ? 1 : 0;
  }

  const folder = `${nextNumber(PROVIDERS)}_${slug}`;
  let wrote = 0;
  for (const [provider, sql] of diffs) {
    if (!sql.trim()) {
      console.log(`${provider}: no changes, nothing written`);
      continue;
    }
    const dir = join(migrationsDir(provider), folder);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "migration.sql"), sql.endsWith("\n") ? sql : `${sql}\n`);
    console.log(`${provider}: wrote prisma/${provider}/migrations/${folder}/migration.sql`);
    wrote++;
  }
  if (wrote) console.log("Review the SQL (data-loss steps, defaults for new required columns) before committing.");
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    console.error(error?.stack ?? String(error));
    process.exit(1);
  },
);
