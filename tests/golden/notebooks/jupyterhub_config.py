# gpuforge (jupyterhub role): JupyterHub for scheduler.notebooks (docs/notebooks.md). Each user's notebook server is
# a Slurm job submitted as that user (batchspawner's SlurmSpawner); users log in with their cluster password (PAM).
# Rendered from jupyterhub_config (gpuforge/render/notebooks.py); do not edit on the node.
c = get_config()  # noqa: F821 (JupyterHub's config loader defines it)

# Who may log in: the cluster's users (scheduler.users), through PAM on this login node: the same accounts and
# passwords as ssh. Sessions are not opened here: the user's session is the Slurm job.
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = set(["alice"])
c.PAMAuthenticator.open_sessions = False

# The proxy users reach: the login node loopback only (ssh -L).
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = 8000
c.ConfigurableHTTPProxy.command = ["/usr/bin/configurable-http-proxy"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:8001"
# The hub's API on this node's address: the notebook servers on the compute nodes call it back.
c.JupyterHub.hub_bind_url = "http://10.0.16.10:8081"
c.JupyterHub.hub_connect_url = "http://10.0.16.10:8081"

# State (the database, the cookie secret the hub generates at its first start) in the hub user's own directory.
c.JupyterHub.db_url = "sqlite:////var/lib/jupyterhub/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "/var/lib/jupyterhub/jupyterhub_cookie_secret"
c.ConfigurableHTTPProxy.pid_file = "/var/lib/jupyterhub/jupyterhub-proxy.pid"

# Notebook servers as Slurm jobs, submitted as the user (sudo -u <user> sbatch: the sudoers rule allows only the
# Slurm commands, only as these users), to the partition, under the user's account, within the limits.
c.JupyterHub.spawner_class = "batchspawner.SlurmSpawner"
c.Spawner.cmd = ["/opt/jupyterhub/bin/jupyterhub-singleuser"]
c.SlurmSpawner.batchspawner_singleuser_cmd = "/opt/jupyterhub/bin/batchspawner-singleuser"
c.SlurmSpawner.req_partition = "gpu"
c.SlurmSpawner.req_runtime = "4:00:00"
c.SlurmSpawner.req_nprocs = "4"
c.SlurmSpawner.req_memory = "32G"
c.SlurmSpawner.req_gres = "gpu:1"
# A server's job may wait in the queue before it runs: the hub gives it 5 minutes from submission to answering
# (Spawner.start_timeout, 60 s by default, counts the wait too), then cancels the job and says so.
c.Spawner.start_timeout = 300
c.Spawner.http_timeout = 120
# batchspawner's Slurm script with the account added (SlurmSpawner has no account line of its own).
c.SlurmSpawner.batch_script = """#!/bin/bash
#SBATCH --output={{homedir}}/jupyterhub_slurmspawner_%j.log
#SBATCH --job-name=jupyterhub-notebook
#SBATCH --chdir={{homedir}}
#SBATCH --export={{keepvars}}
#SBATCH --account={{account}}
#SBATCH --partition={{partition}}
#SBATCH --time={{runtime}}
#SBATCH --cpus-per-task={{nprocs}}
{% if memory %}#SBATCH --mem={{memory}}
{% endif %}{% if gres %}#SBATCH --gres={{gres}}
{% endif %}set -euo pipefail
trap 'echo SIGTERM received' TERM
{{srun}} {{cmd}}
"""
ACCOUNTS = {"alice": "research"}


def charge_the_users_team(spawner):
    """The user's own account (scheduler.users.<user>.account): their team pays for the notebook's time."""
    spawner.req_account = ACCOUNTS[spawner.user.name]


c.Spawner.pre_spawn_hook = charge_the_users_team
