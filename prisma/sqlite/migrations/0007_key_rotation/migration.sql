-- AlterTable
ALTER TABLE "SecretKeyring" ADD COLUMN "rotatedAt" DATETIME;

-- CreateTable
CREATE TABLE "PreviousSealingKey" (
    "organizationId" TEXT NOT NULL,
    "keyId" TEXT NOT NULL,
    "publicKeyPem" TEXT NOT NULL,
    "privateKeyEnc" BLOB NOT NULL,
    "createdAt" DATETIME NOT NULL,
    "retiredAt" DATETIME NOT NULL,

    PRIMARY KEY ("organizationId", "keyId")
);

-- AlterTable (a column with a constant default: SQLite adds it in place, no table copy)
ALTER TABLE "Organization" ADD COLUMN "sealingKeyRotationDays" INTEGER NOT NULL DEFAULT 0;

-- CreateIndex
CREATE INDEX "PreviousSealingKey_retiredAt_idx" ON "PreviousSealingKey"("retiredAt");
