-- CreateTable
CREATE TABLE "OperatorPasskey" (
    "id" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "credentialId" TEXT NOT NULL,
    "publicKey" BYTEA NOT NULL,
    "counter" BIGINT NOT NULL,
    "transports" TEXT NOT NULL,
    "deviceType" TEXT NOT NULL,
    "backedUp" BOOLEAN NOT NULL,
    "name" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lastUsedAt" TIMESTAMP(3),

    CONSTRAINT "OperatorPasskey_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "OperatorPasskeyChallenge" (
    "id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "challenge" TEXT NOT NULL,
    "accountId" TEXT,
    "emailGiven" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "usedAt" TIMESTAMP(3),

    CONSTRAINT "OperatorPasskeyChallenge_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "OperatorPasskey_credentialId_key" ON "OperatorPasskey"("credentialId");

-- CreateIndex
CREATE INDEX "OperatorPasskey_accountId_idx" ON "OperatorPasskey"("accountId");

-- AddForeignKey
ALTER TABLE "OperatorPasskey" ADD CONSTRAINT "OperatorPasskey_accountId_fkey" FOREIGN KEY ("accountId") REFERENCES "Account"("id") ON DELETE CASCADE ON UPDATE CASCADE;
