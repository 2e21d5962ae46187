"""Export for analysts (EXP-1 … EXP-4): records and thread items as Parquet, CSV or NDJSON, streamed in batches."""
