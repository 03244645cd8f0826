"""Front ends: SQL (`sql/`, parsed with sqlglot) and Datalog (`datalog/`, parsed with lark), both
lowering into the circuits of `dbspark.circuit` through a pipeline's catalog of tables and views."""
