// bench/sqlite-adapter: the SQLite driver adapter (src/storage/sqlite-adapter.ts) against
// the wrapper it replaced (the stock @prisma/adapter-better-sqlite3 with its private
// connection patched for the statement cache and the transaction gate), in one process,
// on one database file, taking turns in rounds. Figures are CPU time per operation on the
// event loop (there is no I/O wait: SQLite answers from its page cache).
//
//   node bench/sqlite-adapter.mjs [--against <git revision>] [--rounds 7] [--ops 4000]
//
// --against names the revision whose src/storage/{statement-cache,sqlite-transactions}.ts
// hold the old wrapper (default 2486f7b, the last one with it). Measured:
//   sign-in statements  the password login's plain SQL (login context, rate counter,
//                       session insert and lookup) through Database.sql's door
//   typed query         one findFirst through the Prisma client (its pipeline included)
//   read during a tx    the session lookup while another transaction holds the writer
//                       (both answer it from the second, read-only connection)
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1];
};
const revision = option("against", "2486f7b");
const rounds = Number(option("rounds", 7));
const ops = Number(option("ops", 4000));

// Both implementations are compiled from TypeScript into one folder inside the project, so
// their bare imports resolve to this node_modules.
const work = join(root, "node_modules", ".cache", "bench-sqlite-adapter");
rmSync(work, { recursive: true, force: true });
mkdirSync(join(work, "old"), { recursive: true });
for (const name of ["statement-cache.ts", "sqlite-transactions.ts"]) {
  const source = execFileSync("git", ["show", `${revision}:src/storage/${name}`], { cwd: root, encoding: "utf8" });
  writeFileSync(join(work, "old", name), source);
}
writeFileSync(
  join(work, "old", "old-factory.ts"),
  `import { PrismaBetterSqlite3 } from "@prisma/adapter-better-sqlite3";
import { cacheStatements, connectionOf } from "./statement-cache";
import { isolateTransactions } from "./sqlite-transactions";
// The wrapper as ${revision}'s database.ts built it.
export function createOldFactory(file: string) {
  const factory = new PrismaBetterSqlite3({ url: "file:" + file, timeout: 10_000 });
  const cache = (adapter: unknown) => { const c = connectionOf(adapter); if (!c) throw new Error("no connection"); cacheStatements(c); return c; };
  return { provider: factory.provider, adapterName: factory.adapterName, async connect() {
    const opened = await factory.connect();
    const reader = await factory.connect();
    cache(reader);
    isolateTransactions(opened, cache(opened), reader);
    return opened;
  } };
}
`,
);
writeFileSync(
  join(work, "entry.ts"),
  `export { createOldFactory } from "./old/old-factory";
export { createSqliteAdapterFactory } from ${JSON.stringify(join(root, "src/storage/sqlite-adapter.ts"))};
export { createSql } from ${JSON.stringify(join(root, "src/storage/sql.ts"))};
export { createIdentityStore } from ${JSON.stringify(join(root, "src/storage/identity-store.ts"))};
export { applyMigrations } from ${JSON.stringify(join(root, "src/storage/migrate.ts"))};
export { PrismaClient } from ${JSON.stringify(join(root, "src/storage/generated/sqlite/client.ts"))};
`,
);
await build({
  entryPoints: [join(work, "entry.ts")],
  outfile: join(work, "entry.mjs"),
  bundle: true,
  platform: "node",
  format: "esm",
  packages: "external",
  logLevel: "error",
});
const lib = await import(pathToFileURL(join(work, "entry.mjs")).href);

const dir = mkdtempSync(join(tmpdir(), "gatehouse-bench-adapter-"));
const file = join(dir, "bench.db");
await lib.applyMigrations({ provider: "sqlite", file }, { migrationsDir: join(root, "prisma", "sqlite", "migrations") });

/** One implementation: its client, the plain-SQL door on the adapter the client connected, an identity store over both. */
async function open(name, factory) {
  let adapter;
  const observed = {
    provider: factory.provider,
    adapterName: factory.adapterName,
    async connect() {
      adapter = await factory.connect();
      return adapter;
    },
  };
  const client = new lib.PrismaClient({ adapter: observed });
  await client.$connect();
  const sql = lib.createSql("sqlite", () => adapter);
  return { name, client, adapter: () => adapter, store: lib.createIdentityStore(client, sql) };
}

const impls = [await open("old wrapper", lib.createOldFactory(file)), await open("our adapter", lib.createSqliteAdapterFactory({ file }))];

const organizationId = "00000000-0000-4000-8000-0000000000b1";
const identityId = "00000000-0000-4000-8000-0000000000b2";
const seed = impls[1].client;
await seed.organization.create({ data: { id: organizationId, name: "Bench" } });
await seed.identitySettings.create({ data: { organizationId, password: true, updatedAt: new Date() } });
await seed.identity.create({ data: { id: identityId, organizationId, identifier: "bench@example.com" } });
await seed.passwordCredential.create({ data: { identityId, organizationId, hash: "$argon2id$...", updatedAt: new Date() } });

let sequence = 0;
const cases = {
  "sign-in statements": async ({ store }) => {
    const now = new Date();
    await store.findLoginContext(organizationId, "bench@example.com", {
      identifierHash: "h",
      since: new Date(now.getTime() - 900_000),
      threshold: 5,
    });
    await store.hitRateCounter(`ip:bench:${sequence % 64}`, new Date(Math.floor(now.getTime() / 60_000) * 60_000));
    const id = `bench-${sequence++}`;
    await store.createSession({
      id,
      organizationId,
      identityId,
      method: "password",
      createdAt: now,
      expiresAt: new Date(now.getTime() + 3_600_000),
    });
    await store.findSession(organizationId, id);
  },
  "typed query": async ({ client }) => {
    await client.identity.findFirst({ where: { id: identityId, organizationId } });
  },
  "read during a tx": async ({ store }) => {
    await store.findSession(organizationId, "bench-0");
  },
};

/** CPU microseconds per operation of `n` operations, one at a time. */
async function measure(impl, run, n) {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) await run(impl);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

/** Runs `fn` with another transaction holding the writer of `impl` (opened through its adapter). */
async function withOpenTransaction(impl, fn) {
  const tx = await impl.adapter().startTransaction();
  try {
    return await fn();
  } finally {
    await tx.executeRaw({ sql: "ROLLBACK", args: [], argTypes: [] });
    await tx.rollback();
  }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

console.log(`SQLite adapter, ${rounds} rounds of ${ops} operations each, old wrapper from ${revision} (CPU µs per operation, medians)\n`);
console.log("case                  old wrapper   our adapter   ours / old");
for (const [label, run] of Object.entries(cases)) {
  const during = label === "read during a tx";
  const results = new Map(impls.map((impl) => [impl.name, []]));
  for (const impl of impls) await (during ? withOpenTransaction(impl, () => measure(impl, run, 200)) : measure(impl, run, 200)); // warm-up
  for (let round = 0; round < rounds; round++) {
    // Alternate which goes first, so neither always meets a warmer cache.
    for (const impl of round % 2 === 0 ? impls : [...impls].reverse()) {
      const perOp = during ? await withOpenTransaction(impl, () => measure(impl, run, ops)) : await measure(impl, run, ops);
      results.get(impl.name).push(perOp);
    }
  }
  const [oldMedian, newMedian] = impls.map((impl) => median(results.get(impl.name)));
  console.log(
    `${label.padEnd(20)} ${oldMedian.toFixed(1).padStart(11)} ${newMedian.toFixed(1).padStart(13)} ${(newMedian / oldMedian).toFixed(2).padStart(12)}`,
  );
}

for (const impl of impls) await impl.client.$disconnect();
rmSync(dir, { recursive: true, force: true });
rmSync(work, { recursive: true, force: true });
