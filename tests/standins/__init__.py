"""Stand-ins for package sources tests cannot reach (NVIDIA's CUDA repository, the EFA installer, the FSx
Lustre client repository, a published dcgm-exporter binary): built per session, served on 127.0.0.1."""
