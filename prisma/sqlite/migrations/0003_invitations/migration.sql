-- CreateTable
CREATE TABLE "Invitation" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "organizationId" TEXT NOT NULL,
    "email" TEXT NOT NULL,
    "displayName" TEXT NOT NULL,
    "role" TEXT NOT NULL,
    "tokenHash" TEXT NOT NULL,
    "invitedById" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL
);

-- CreateIndex
CREATE UNIQUE INDEX "Invitation_tokenHash_key" ON "Invitation"("tokenHash");

-- CreateIndex
CREATE UNIQUE INDEX "Invitation_organizationId_email_key" ON "Invitation"("organizationId", "email");

-- Data: people who were invited but never set up their account (a person
-- account without a password that is not an organisation owner's placeholder
-- from `gatehouse init` / `gatehouse orgs create`, whose address ends in
-- .invalid) become invitations of each organisation they were added to, with
-- the role they had there. Their setup tokens are not carried over: a token
-- was bound to the account, not to the organisation that issued it (the flaw
-- invitations close), so no outstanding link can be attributed to an
-- organisation safely. The invitations are therefore stored expired (expiresAt
-- = createdAt) and with a token hash no token can have (not hex): an admin
-- re-issues the link. The accounts, their memberships, setup tokens and
-- sessions are then deleted: accepting the invitation creates the account anew.
INSERT INTO "Invitation" ("id", "organizationId", "email", "displayName", "role", "tokenHash", "invitedById", "createdAt", "expiresAt")
SELECT
    lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-' || lower(hex(randomblob(2))) || '-' ||
        lower(hex(randomblob(2))) || '-' || lower(hex(randomblob(6))),
    m."organizationId",
    a."email",
    a."displayName",
    m."role",
    'migrated:' || m."organizationId" || ':' || a."id",
    NULL,
    m."createdAt",
    m."createdAt"
FROM "Membership" m
JOIN "Account" a ON a."id" = m."accountId"
WHERE a."kind" = 'person' AND a."passwordHash" IS NULL AND a."disabledAt" IS NULL AND a."email" NOT LIKE '%.invalid';

DELETE FROM "AccountSetupToken" WHERE "accountId" IN (
    SELECT "id" FROM "Account" WHERE "kind" = 'person' AND "passwordHash" IS NULL AND "email" NOT LIKE '%.invalid'
);
DELETE FROM "DashboardSession" WHERE "accountId" IN (
    SELECT "id" FROM "Account" WHERE "kind" = 'person' AND "passwordHash" IS NULL AND "email" NOT LIKE '%.invalid'
);
DELETE FROM "Membership" WHERE "accountId" IN (
    SELECT "id" FROM "Account" WHERE "kind" = 'person' AND "passwordHash" IS NULL AND "email" NOT LIKE '%.invalid'
);
DELETE FROM "Account" WHERE "kind" = 'person' AND "passwordHash" IS NULL AND "email" NOT LIKE '%.invalid';
