"""The export schemas (EXP-3) and the writers that turn batches of rows into file bytes (EXP-1, EXP-2).

The database hands over blocks of CSV rows (`COPY … TO STDOUT`) whose instants are microseconds since the epoch
(an integer parses exactly and fast), lists JSON arrays and booleans `t`/`f`; `frame` parses a block with
polars and casts it to the documented dtypes.
A writer takes one DataFrame at a time and returns the bytes it produced, so the CLI appends them to a file
and the HTTP route streams them: neither holds more than three blocks (one being read, one being encoded,
the bytes of the one before).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any, Literal

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

Format = Literal["parquet", "csv", "ndjson"]
FORMATS: tuple[Format, ...] = ("parquet", "csv", "ndjson")
MEDIA_TYPES: dict[str, str] = {
    "parquet": "application/vnd.apache.parquet",
    "csv": "text/csv; charset=utf-8",
    "ndjson": "application/x-ndjson",
}
EXTENSIONS: dict[str, str] = {"parquet": "parquet", "csv": "csv", "ndjson": "ndjson"}

INSTANT = pl.Datetime("us", "UTC")
STRINGS = pl.List(pl.String)

RECORD_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(),
    "index_id": pl.String(),
    "subject": pl.String(),
    "type": pl.String(),
    "text": pl.String(),
    "metadata": pl.String(),
    "labels": pl.String(),
    "confidence": pl.Float64(),
    "effective_confidence": pl.Float64(),
    "contested": pl.Boolean(),
    "contested_with": pl.String(),
    "recall_count": pl.Int64(),
    "source": pl.String(),
    "verified": pl.Boolean(),
    "key": pl.String(),
    "tags": STRINGS,
    "priority": pl.String(),
    "expires_at": INSTANT,
    "status": pl.String(),
    "replaces": pl.String(),
    "replaced_by": pl.String(),
    "confirmations": pl.Int64(),
    "last_confirmed_at": INSTANT,
    "provenance": pl.String(),
    "version": pl.Int64(),
    "commitment_status": pl.String(),
    "commitment_due_at": INSTANT,
    "commitment_promised_to": pl.String(),
    "episode_from": INSTANT,
    "episode_to": INSTANT,
    "episode_thread_id": pl.String(),
    "episode_first_item_id": pl.String(),
    "episode_last_item_id": pl.String(),
    "episode_intent": pl.String(),
    "episode_result": pl.String(),
    "episode_result_basis": pl.String(),
    "episode_response_ids": STRINGS,
    "episode_agent_id": pl.String(),
    "episode_agent_version": pl.String(),
    "episode_tools": pl.String(),
    "created_at": INSTANT,
    "updated_at": INSTANT,
}

ITEM_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(),
    "thread_id": pl.String(),
    "position": pl.Int64(),
    "type": pl.String(),
    "role": pl.String(),
    "subject": pl.String(),
    "response_id": pl.String(),
    "text": pl.String(),
    "body": pl.String(),
    "created_at": INSTANT,
}

SCHEMAS: dict[str, dict[str, pl.DataType]] = {"records": RECORD_SCHEMA, "thread_items": ITEM_SCHEMA}


def wire_schema(schema: Mapping[str, pl.DataType]) -> dict[str, pl.DataType]:
    """How PostgreSQL's CSV carries each column: instants as integer microseconds, lists and booleans as text."""
    def wire(dtype: pl.DataType) -> pl.DataType:
        if dtype == INSTANT:
            return pl.Int64()
        if isinstance(dtype, pl.List) or dtype == pl.Boolean:
            return pl.String()
        return dtype

    return {name: wire(dtype) for name, dtype in schema.items()}


def csv_schema(schema: Mapping[str, pl.DataType]) -> dict[str, pl.DataType]:
    """The schema to give `pl.read_csv`: CSV has no lists, so list columns are JSON array strings there."""
    return {name: pl.String() if isinstance(dtype, pl.List) else dtype for name, dtype in schema.items()}


def _typed(name: str, dtype: pl.DataType) -> pl.Expr:
    if dtype == INSTANT:
        return pl.col(name).cast(dtype)
    if dtype == pl.Boolean:
        return pl.col(name) == "t"
    if isinstance(dtype, pl.List):
        return pl.col(name).str.json_decode(dtype)
    return pl.col(name)


def frame(block: bytes, schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """A block of whole CSV rows from PostgreSQL (NULL unquoted and empty, text quoted as needed) as a typed
    DataFrame."""
    if not block:
        return pl.DataFrame(schema=dict(schema))
    raw = pl.read_csv(block, has_header=False, new_columns=list(schema), schema=wire_schema(schema),
                      quote_char='"')
    return raw.select(_typed(name, dtype).alias(name) for name, dtype in schema.items())


def _json_lists(df: pl.DataFrame) -> pl.DataFrame:
    """List columns as JSON arrays (`["a","b"]`), null stays null: the CSV spelling of `List(String)`."""
    encoded = []
    for name, dtype in df.schema.items():
        if isinstance(dtype, pl.List):
            as_json = pl.struct(pl.col(name).alias("v")).struct.json_encode().str.slice(5).str.strip_suffix("}")
            encoded.append(pl.when(pl.col(name).is_null()).then(None).otherwise(as_json).alias(name))
    return df.with_columns(encoded) if encoded else df


class _Drain(io.RawIOBase):
    """A write-only file whose contents are taken away after every batch, so nothing accumulates."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._chunks.append(chunk)
        self._position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self._position

    def take(self) -> bytes:
        out = b"".join(self._chunks)
        self._chunks.clear()
        return out


class Writer:
    """Turns DataFrames into one file's bytes, batch by batch."""

    def __init__(self, fmt: Format, schema: Mapping[str, pl.DataType]) -> None:
        self.fmt = fmt
        self.schema = dict(schema)
        self._sink = _Drain()
        self._parquet: pq.ParquetWriter | None = None
        self._header_written = False

    def write(self, df: pl.DataFrame) -> bytes:
        if self.fmt == "parquet":
            table = df.to_arrow()
            if self._parquet is None:
                self._parquet = pq.ParquetWriter(pa.PythonFile(self._sink, mode="w"), table.schema,
                                                 compression="zstd")
            if df.height:
                self._parquet.write_table(table)  # one row group per batch
            return self._sink.take()
        if self.fmt == "csv":
            out = _json_lists(df).write_csv(include_header=not self._header_written)
            self._header_written = True
            return out.encode()
        return df.write_ndjson().encode() if df.height else b""

    def close(self) -> bytes:
        """The file's last bytes: the Parquet footer, or a CSV header when no batch came."""
        if self.fmt == "parquet":
            if self._parquet is None:
                self.write(pl.DataFrame(schema=self.schema))
            assert self._parquet is not None
            self._parquet.close()
            return self._sink.take()
        if self.fmt == "csv" and not self._header_written:
            return self.write(pl.DataFrame(schema=self.schema))
        return b""
