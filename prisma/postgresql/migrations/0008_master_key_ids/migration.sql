-- AlterTable
ALTER TABLE "PreviousSealingKey" ADD COLUMN     "masterKeyId" TEXT;

-- AlterTable
ALTER TABLE "SecretKeyring" ADD COLUMN     "masterKeyId" TEXT;

-- AlterTable
ALTER TABLE "SessionSigningKey" ADD COLUMN     "masterKeyId" TEXT;

-- AlterTable
ALTER TABLE "SigningKey" ADD COLUMN     "masterKeyId" TEXT;

-- AlterTable
ALTER TABLE "SystemState" ADD COLUMN     "masterKeyId" TEXT;
