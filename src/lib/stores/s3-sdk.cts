// The parts of the AWS SDK that the s3:// store (s3.ts) uses at run time, gathered in one
// CommonJS module so that s3.ts can load them synchronously the first time an S3Store is made,
// rather than with every program that imports the stores. The SDK is well over a megabyte of
// code; commands that never open an s3:// store (most of them) should not compile or hold it.
//
// In the CLI bundle (scripts/bundle.mjs) this module is a bundle file of its own, loaded through
// the code-cached loader; unbundled, s3.ts requires this file next to it.
export {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
  paginateListObjectsV2,
} from '@aws-sdk/client-s3';
export { getSignedUrl } from '@aws-sdk/s3-request-presigner';
