"""``python -m spark_ingest --url … --topic … --output PATH``; also a ``spark-submit`` main file.

Absolute imports on purpose: spark-submit runs this file as a script, with the
package shipped through ``--py-files`` (or installed), so relative imports would fail.
"""

import sys

from spark_ingest.job import main

if __name__ == "__main__":
    sys.exit(main())
