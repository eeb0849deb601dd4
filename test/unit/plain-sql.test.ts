import type { Database } from "../../src/storage/database.js";
import { createTestDatabase, openTestDatabase, type TestDatabase } from "../support/database.js";

// Database.sql hands statements to the driver adapter without Prisma's client
// pipeline; callers must see exactly what `$queryRaw` gives for the same text.

let testDb: TestDatabase;
let db: Database;
const organizationId = "00000000-0000-4000-8000-000000000001";
const updatedAt = new Date("2026-11-24T10:11:12.345Z");

beforeAll(async () => {
  testDb = await createTestDatabase();
  db = await openTestDatabase(testDb);
  await db.client.organization.create({ data: { id: organizationId, name: "Plain SQL" } });
  await db.client.identitySettings.create({
    data: {
      organizationId,
      passkeys: true,
      magicLinks: false,
      password: true,
      rpId: "example.com",
      origins: null,
      sessionTtlSeconds: 3600,
      updatedAt,
    },
  });
  for (const [i, at] of ["2026-11-24T10:00:00.000Z", "2026-11-24T10:00:01.500Z", "2026-11-24T10:00:02.000Z"].entries()) {
    await db.client.loginFailure.create({ data: { id: `f${i}`, organizationId, identifier: "h", createdAt: new Date(at) } });
  }
});

afterAll(async () => {
  await db.close();
  await testDb.drop();
});

test("a row of booleans, text, integers, null and a date-time reads the same as through $queryRaw", async () => {
  const viaSql = await db.sql.query`
    SELECT "passkeys", "magicLinks", "password", "rpId", "origins", "sessionTtlSeconds", "updatedAt"
    FROM "IdentitySettings" WHERE "organizationId" = ${organizationId}`;
  const viaPrisma = await db.client.$queryRaw`
    SELECT "passkeys", "magicLinks", "password", "rpId", "origins", "sessionTtlSeconds", "updatedAt"
    FROM "IdentitySettings" WHERE "organizationId" = ${organizationId}`;
  expect(viaSql).toEqual(viaPrisma);
  expect(viaSql).toEqual([
    { passkeys: true, magicLinks: false, password: true, rpId: "example.com", origins: null, sessionTtlSeconds: 3600, updatedAt },
  ]);
});

test("date-time and integer parameters, LIMIT and a derived table read the same", async () => {
  const since = new Date("2026-11-24T10:00:01.000Z");
  const viaSql = await db.sql.query`
    SELECT f."createdAt" AS "failedAt" FROM (SELECT 1 AS "anchor") AS "anchor"
    LEFT JOIN (SELECT "createdAt" FROM "LoginFailure" WHERE "organizationId" = ${organizationId} AND "createdAt" >= ${since}
               ORDER BY "createdAt" DESC LIMIT ${5}) AS f ON 1 = 1`;
  const viaPrisma = await db.client.$queryRaw`
    SELECT f."createdAt" AS "failedAt" FROM (SELECT 1 AS "anchor") AS "anchor"
    LEFT JOIN (SELECT "createdAt" FROM "LoginFailure" WHERE "organizationId" = ${organizationId} AND "createdAt" >= ${since}
               ORDER BY "createdAt" DESC LIMIT ${5}) AS f ON 1 = 1`;
  expect(viaSql).toEqual(viaPrisma);
  expect(viaSql.map((row) => new Date(row.failedAt as Date | string).toISOString())).toEqual([
    "2026-11-24T10:00:02.000Z",
    "2026-11-24T10:00:01.500Z",
  ]);
});

test("an upsert's RETURNING count and execute's changed rows agree with Prisma's", async () => {
  const windowStart = new Date("2026-11-24T10:00:00.000Z");
  const first = await db.sql.query`
    INSERT INTO "RateCounter" ("key", "windowStart", "count") VALUES (${"k"}, ${windowStart}, 1)
    ON CONFLICT ("key") DO UPDATE SET "count" = "RateCounter"."count" + 1 RETURNING "count"`;
  const second = await db.client.$queryRaw`
    INSERT INTO "RateCounter" ("key", "windowStart", "count") VALUES (${"k"}, ${windowStart}, 1)
    ON CONFLICT ("key") DO UPDATE SET "count" = "RateCounter"."count" + 1 RETURNING "count"`;
  const third = await db.sql.query`
    INSERT INTO "RateCounter" ("key", "windowStart", "count") VALUES (${"k"}, ${windowStart}, 1)
    ON CONFLICT ("key") DO UPDATE SET "count" = "RateCounter"."count" + 1 RETURNING "count"`;
  expect([first, second, third].map((rows) => Number((rows as { count: number | bigint }[])[0]?.count))).toEqual([1, 2, 3]);
  expect(typeof (third as { count: unknown }[])[0]?.count).toBe(typeof (second as { count: unknown }[])[0]?.count);
  expect(await db.sql.execute`UPDATE "RateCounter" SET "count" = 0 WHERE "key" = ${"k"} OR "key" = ${"absent"}`).toBe(1);
  expect(await db.client.rateCounter.findUnique({ where: { key: "k" } })).toEqual({ key: "k", windowStart, count: 0 });
});

test("values are bound, never spliced into the SQL text", async () => {
  const hostile = `x' OR '1'='1`;
  expect(await db.sql.query`SELECT "organizationId" FROM "IdentitySettings" WHERE "organizationId" = ${hostile}`).toEqual([]);
});
