-- CreateTable
CREATE TABLE "OperatorSignInLink" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "accountId" TEXT NOT NULL,
    "hash" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL,
    "usedAt" DATETIME
);

-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_LoginFailure" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "organizationId" TEXT NOT NULL,
    "identifier" TEXT NOT NULL,
    "client" TEXT NOT NULL DEFAULT '',
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
INSERT INTO "new_LoginFailure" ("createdAt", "id", "identifier", "organizationId") SELECT "createdAt", "id", "identifier", "organizationId" FROM "LoginFailure";
DROP TABLE "LoginFailure";
ALTER TABLE "new_LoginFailure" RENAME TO "LoginFailure";
CREATE INDEX "LoginFailure_organizationId_identifier_createdAt_idx" ON "LoginFailure"("organizationId", "identifier", "createdAt");
CREATE INDEX "LoginFailure_organizationId_identifier_client_createdAt_idx" ON "LoginFailure"("organizationId", "identifier", "client", "createdAt");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

-- CreateIndex
CREATE UNIQUE INDEX "OperatorSignInLink_hash_key" ON "OperatorSignInLink"("hash");

-- CreateIndex
CREATE INDEX "OperatorSignInLink_accountId_idx" ON "OperatorSignInLink"("accountId");

-- CreateIndex
CREATE INDEX "OperatorSignInLink_expiresAt_idx" ON "OperatorSignInLink"("expiresAt");
