"""The bundled example experiments (File > Examples), installed as ``gradviz.examples``."""
