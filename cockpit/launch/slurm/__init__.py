"""The Slurm launcher: sbatch at launch (launcher), the supervisor's view of the job (node),
requeue attempts (attempts).
"""
