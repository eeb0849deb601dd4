-- CreateTable
CREATE TABLE "GatewayKey" (
    "id" TEXT NOT NULL,
    "organizationId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "hash" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lastUsedAt" TIMESTAMP(3),
    "revokedAt" TIMESTAMP(3),

    CONSTRAINT "GatewayKey_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ConsumerKey" (
    "id" TEXT NOT NULL,
    "organizationId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "hash" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "revokedAt" TIMESTAMP(3),

    CONSTRAINT "ConsumerKey_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "GatewayConnection" (
    "organizationId" TEXT NOT NULL,
    "gatewayId" TEXT NOT NULL,
    "gatewayKeyId" TEXT NOT NULL,
    "revision" INTEGER NOT NULL,
    "connectedAt" TIMESTAMP(3) NOT NULL,
    "lastSeenAt" TIMESTAMP(3) NOT NULL,
    "disconnectedAt" TIMESTAMP(3),

    CONSTRAINT "GatewayConnection_pkey" PRIMARY KEY ("organizationId","gatewayId")
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

-- Session revocations announce themselves from the database, whoever writes
-- them (any instance, the dashboard, an operator command in another process):
-- every gateway of the organisation holds its live revocations. The change feed
-- listens on "gatehouse_gateway", and PostgreSQL sends NOTIFY at commit only,
-- and identical payloads of one transaction once (revoking every session of an
-- identity is one notification). The function body is an escape string whose
-- statement separators are written \x3B: the migration tooling splits scripts
-- at every semicolon, even inside quotes.
CREATE FUNCTION "gatehouse_announce_session_revocation"() RETURNS trigger LANGUAGE plpgsql AS
E'BEGIN PERFORM pg_notify(''gatehouse_gateway'', NEW."organizationId" || '' sessions'')\x3B RETURN NULL\x3B END';

CREATE TRIGGER "IdentitySession_revocation_announced"
  AFTER UPDATE OF "revokedAt" ON "IdentitySession"
  FOR EACH ROW WHEN (OLD."revokedAt" IS NULL AND NEW."revokedAt" IS NOT NULL)
  EXECUTE FUNCTION "gatehouse_announce_session_revocation"();
