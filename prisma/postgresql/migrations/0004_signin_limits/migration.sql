-- AlterTable
ALTER TABLE "LoginFailure" ADD COLUMN     "client" TEXT NOT NULL DEFAULT '';

-- CreateTable
CREATE TABLE "OperatorSignInLink" (
    "id" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "hash" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "usedAt" TIMESTAMP(3),

    CONSTRAINT "OperatorSignInLink_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "OperatorSignInLink_hash_key" ON "OperatorSignInLink"("hash");

-- CreateIndex
CREATE INDEX "OperatorSignInLink_accountId_idx" ON "OperatorSignInLink"("accountId");

-- CreateIndex
CREATE INDEX "OperatorSignInLink_expiresAt_idx" ON "OperatorSignInLink"("expiresAt");

-- CreateIndex
CREATE INDEX "LoginFailure_organizationId_identifier_client_createdAt_idx" ON "LoginFailure"("organizationId", "identifier", "client", "createdAt");
