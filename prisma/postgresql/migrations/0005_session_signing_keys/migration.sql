-- CreateTable
CREATE TABLE "SessionSigningKey" (
    "id" TEXT NOT NULL,
    "organizationId" TEXT NOT NULL,
    "privateKeyEnc" BYTEA NOT NULL,
    "publicJwk" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "retiredAt" TIMESTAMP(3),
    "publishedUntil" TIMESTAMP(3),

    CONSTRAINT "SessionSigningKey_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "SessionSigningKey_organizationId_retiredAt_idx" ON "SessionSigningKey"("organizationId", "retiredAt");

-- CreateIndex
CREATE INDEX "SessionSigningKey_publishedUntil_idx" ON "SessionSigningKey"("publishedUntil");
