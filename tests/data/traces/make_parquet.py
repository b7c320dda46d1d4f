"""Writes the Parquet examples from the CSV ones, in the layout a Parquet conversion gives them (Hugging
Face's datasets serve BurstGPT as Parquet with the CSV's columns; an Azure trace converted with pandas
keeps TIMESTAMP as a date-time column). Run from this folder: python make_parquet.py"""

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

burst = pacsv.read_csv("burstgpt.csv")
pq.write_table(burst.set_column(0, "Timestamp", burst["Timestamp"].cast(pa.float64())), "burstgpt.parquet")
azure = pacsv.read_csv("azure_code_1week_2024.csv")  # TIMESTAMP read as a UTC timestamp column
pq.write_table(azure, "azure_code_1week_2024.parquet")
