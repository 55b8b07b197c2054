"""Deep storage (local, S3, GCS, HDFS through pyarrow.fs): files, root claims, fenced deletes."""
