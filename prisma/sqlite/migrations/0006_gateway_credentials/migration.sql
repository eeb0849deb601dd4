-- CreateTable
CREATE TABLE "GatewayKey" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "organizationId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "hash" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lastUsedAt" DATETIME,
    "revokedAt" DATETIME
);

-- CreateTable
CREATE TABLE "ConsumerKey" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "organizationId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "hash" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "revokedAt" DATETIME
);

-- CreateTable
CREATE TABLE "GatewayConnection" (
    "organizationId" TEXT NOT NULL,
    "gatewayId" TEXT NOT NULL,
    "gatewayKeyId" TEXT NOT NULL,
    "revision" INTEGER NOT NULL,
    "connectedAt" DATETIME NOT NULL,
    "lastSeenAt" DATETIME NOT NULL,
    "disconnectedAt" DATETIME,

    PRIMARY KEY ("organizationId", "gatewayId")
);

-- CreateIndex
CREATE UNIQUE INDEX "GatewayKey_hash_key" ON "GatewayKey"("hash");

-- CreateIndex
CREATE INDEX "GatewayKey_organizationId_createdAt_idx" ON "GatewayKey"("organizationId", "createdAt");

-- CreateIndex
CREATE UNIQUE INDEX "ConsumerKey_hash_key" ON "ConsumerKey"("hash");

-- CreateIndex
CREATE INDEX "ConsumerKey_organizationId_createdAt_idx" ON "ConsumerKey"("organizationId", "createdAt");

-- CreateIndex
CREATE INDEX "GatewayConnection_lastSeenAt_idx" ON "GatewayConnection"("lastSeenAt");

-- CreateIndex
CREATE INDEX "IdentitySession_organizationId_revokedAt_idx" ON "IdentitySession"("organizationId", "revokedAt");
