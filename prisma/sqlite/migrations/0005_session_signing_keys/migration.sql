-- CreateTable
CREATE TABLE "SessionSigningKey" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "organizationId" TEXT NOT NULL,
    "privateKeyEnc" BLOB NOT NULL,
    "publicJwk" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "retiredAt" DATETIME,
    "publishedUntil" DATETIME
);

-- CreateIndex
CREATE INDEX "SessionSigningKey_organizationId_retiredAt_idx" ON "SessionSigningKey"("organizationId", "retiredAt");

-- CreateIndex
CREATE INDEX "SessionSigningKey_publishedUntil_idx" ON "SessionSigningKey"("publishedUntil");
