-- AlterTable
ALTER TABLE "Organization" ADD COLUMN     "sealingKeyRotationDays" INTEGER NOT NULL DEFAULT 0;

-- AlterTable
ALTER TABLE "SecretKeyring" ADD COLUMN     "rotatedAt" TIMESTAMP(3);

-- CreateTable
CREATE TABLE "PreviousSealingKey" (
    "organizationId" TEXT NOT NULL,
    "keyId" TEXT NOT NULL,
    "publicKeyPem" TEXT NOT NULL,
    "privateKeyEnc" BYTEA NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL,
    "retiredAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "PreviousSealingKey_pkey" PRIMARY KEY ("organizationId","keyId")
);

-- CreateIndex
CREATE INDEX "PreviousSealingKey_retiredAt_idx" ON "PreviousSealingKey"("retiredAt");
