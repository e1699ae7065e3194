"""A Spark job that migrates a savepoint with statemorph: the job docs/spark.md ships to a cluster.

    spark-submit --archives statemorph-env.tar.gz#env --conf spark.pyspark.python=./env/bin/python \\
        spark_migrate_job.py SRC NEW.toml DST

SRC and DST are paths every executor sees (HDFS, a shared mount); NEW.toml is a schema file
(docs/cli.md); both savepoint forms work. The master, the archive and everything else about the
cluster come from spark-submit; the job runs ``statemorph migrate --engine spark`` in the session
spark-submit configured, so it plans, checks and reports exactly as the command does.
"""

import sys

from statemorph import cli
from statemorph.engine import spark as sms


def main(src: str, schema: str, dst: str) -> int:
    spark = sms.session(master=None, app_name="statemorph-migrate")  # the master comes from spark-submit
    try:
        return cli.main(["migrate", src, "--schema", schema, "--out", dst, "--engine", "spark"])
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
